"""``decode_audio`` (PCM equal to the source for lossless codecs, resampling, layouts, clips, bad
input) and ``log_mel`` against ``transformers``' ``WhisperFeatureExtractor`` to 1e-4."""

from __future__ import annotations

import functools
from fractions import Fraction

import numpy as np
import pytest
from zephon_av import DecodeAudio, LogMel, MediaDecodeError, decode_pcm, log_mel_spectrogram
from zephon_av.audio import audio_duration
from zephon_av.testing import chirp, encode_audio, encode_video, moving_frames

from zephon_core import Dataset, Pipeline, StaticMixtureWorkSource
from zephon_core.errors import ConfigError, OperatorError
from zephon_core.work.ids import split_sample_id


@functools.cache
def flac(seconds: float = 2.0, channels: int = 1, rate: int = 16000, seed: int = 0) -> bytes:
    return encode_audio(chirp(seconds, rate, channels, seed), sample_rate=rate)


def test_lossless_audio_decodes_to_its_samples():
    source = chirp(1.5, 16000, 2)
    for codec, container in (("flac", "flac"), ("pcm_s16le", "wav")):
        pcm = decode_pcm(encode_audio(source, codec=codec, container=container), sample_rate=16000, layout="stereo")
        assert pcm.shape == source.shape and pcm.dtype == np.float32
        assert np.abs(pcm - source).max() <= 1 / 32768 + 1e-7  # 16-bit quantization, nothing else


def test_resampling_and_down_mixing():
    data = flac(1.0, channels=2, rate=44100)
    pcm = DecodeAudio(sample_rate=16000, channels=1).fn({"audio": data})["audio"]
    assert pcm.shape == (1, 16000)
    stereo = DecodeAudio(sample_rate=8000, layout="stereo").fn({"audio": data})["audio"]
    assert stereo.shape == (2, 8000)
    # a 440 Hz tone resampled keeps its pitch
    tone = np.sin(2 * np.pi * 440 * np.arange(44100) / 44100).astype(np.float32)[None]
    pcm = decode_pcm(encode_audio(tone, sample_rate=44100), sample_rate=16000, layout="mono")[0]
    spectrum = np.abs(np.fft.rfft(pcm[2000:14000]))
    assert abs(np.argmax(spectrum) * 16000 / 12000 - 440) < 2


def test_lossy_codecs_and_a_videos_sound_track():
    source = chirp(1.0)
    for codec, container in (("libopus", "ogg"), ("aac", "mp4")):
        pcm = decode_pcm(encode_audio(source, codec=codec, container=container), sample_rate=16000, layout="mono")
        assert abs(pcm.shape[1] - 16000) <= 2048  # encoder priming/padding: up to two AAC frames
        assert np.abs(pcm).max() > 0.3
    video = encode_video(moving_frames(10), audio=chirp(1.0))
    out = DecodeAudio(field=("wav", "mp4")).fn({"mp4": video, "n": 1})
    assert out["audio"].shape[0] == 1 and out["audio"].shape[1] > 15000 and "mp4" not in out


def test_clips_are_exact_windows_of_the_whole():
    data = flac(2.0)
    whole = decode_pcm(data, sample_rate=16000, layout="mono")
    assert audio_duration(data) == Fraction(2)
    op = DecodeAudio(clip_seconds=0.5, seed=4)
    assert op.takes_rng
    starts = set()
    for seed in range(4):
        out = op.fn({"audio": data}, rng=np.random.default_rng(seed))
        start = round(out["audio_offset"] * 16000)
        starts.add(start)
        assert out["audio"].shape == (1, 8000)
        assert np.array_equal(out["audio"], whole[:, start : start + 8000])
    assert len(starts) == 4
    centre = DecodeAudio(clip_seconds=0.5, clip_start="center").fn({"audio": data})
    assert centre["audio_offset"] == 0.75
    padded = DecodeAudio(clip_seconds=3.0, clip_start="start").fn({"audio": data})["audio"]
    assert padded.shape == (1, 48000) and np.array_equal(padded[:, :32000], whole) and not padded[:, 32000:].any()


def test_options_are_checked():
    for kw, msg in [
        ({"channels": 3}, "channels"),
        ({"channels": 1, "layout": "mono"}, "not both"),
        ({"layout": "octopus"}, "layout"),
        ({"sample_rate": 0}, "sample_rate"),
        ({"clip_seconds": -1}, "clip_seconds"),
    ]:
        with pytest.raises(ConfigError, match=msg):
            DecodeAudio(**kw)


def bad_audio() -> dict[str, bytes]:
    return {
        "zero-length": encode_audio(np.zeros((1, 0), np.float32)),
        "empty": b"",
        "video only": encode_video(moving_frames(6)),
        "truncated": flac(1.0)[:200],
    }


@pytest.mark.parametrize("kind", ["zero-length", "empty", "video only", "truncated"])
def test_bad_audio_is_an_error_naming_the_sample(kind):
    with pytest.raises(MediaDecodeError, match="decode_audio: field 'audio'.*not decodable audio") as info:
        DecodeAudio().fn({"audio": bad_audio()[kind]})
    if kind == "video only":
        assert "no audio stream" in str(info.value)
    if kind == "zero-length":
        assert "no samples" in str(info.value)
    recs = [{"audio": flac(0.5), "n": 0}, {"audio": bad_audio()[kind], "n": 1}]
    src = StaticMixtureWorkSource([Dataset.from_records("speech", recs)], chunk_size=2, shuffle=False)
    pipe = (
        Pipeline(src)
        .decode_audio(timeout_s=20)
        .batch(1, collate=lambda rows: {"n": np.asarray([r["n"] for r in rows])})
    )
    with pytest.raises(OperatorError, match="speech"):
        with pipe:
            list(pipe)


def test_skip_drops_bad_audio_as_tombstones():
    bad = bad_audio()
    recs = [
        {"audio": flac(0.5), "n": 0},
        {"audio": bad["zero-length"], "n": 1},
        {"audio": flac(0.7), "n": 2},
        {"audio": bad["video only"], "n": 3},
    ]
    src = StaticMixtureWorkSource([Dataset.from_records("speech", recs)], chunk_size=4, shuffle=False)
    pipe = (
        Pipeline(src)
        .decode_audio(clip_seconds=0.25, on_error="skip")
        .batch(1, collate=lambda rows: {"n": np.asarray([r["n"] for r in rows])})
    )
    with pipe:
        batches = list(pipe)
    assert [int(b.data["n"][0]) for b in batches] == [0, 2]
    assert sorted(off for b in batches for lin in b.dropped for _, off in map(split_sample_id, lin)) == [1, 3]


# -- log-mel -----------------------------------------------------------------------------------------
@pytest.mark.slow  # importing transformers takes 5-20 s
@pytest.mark.parametrize("n_mels", [80, 128])
def test_log_mel_matches_whisper_feature_extractor(n_mels):
    transformers = pytest.importorskip("transformers", reason="transformers is the reference (zephon-av[test])")
    reference = transformers.WhisperFeatureExtractor(feature_size=n_mels)
    pcm = decode_pcm(flac(3.0, seed=n_mels), sample_rate=16000, layout="mono")
    want = reference(pcm[0], sampling_rate=16000, return_tensors="np").input_features[0]
    got = LogMel(n_mels).fn({"audio": pcm})["input_features"]
    assert got.shape == want.shape == (n_mels, 3000) and got.dtype == np.float32
    assert np.abs(got - want).max() < 1e-4
    # without 30 s padding: the same formula over the audio as it is
    want = reference(pcm[0], sampling_rate=16000, return_tensors="np", padding="longest").input_features[0]
    got = log_mel_spectrogram(pcm, n_mels=n_mels)
    assert got.shape == want.shape == (n_mels, 300)
    assert np.abs(got - want).max() < 1e-4


def test_log_mel_input_is_checked():
    with pytest.raises(TypeError, match="mono PCM"):
        LogMel().fn({"audio": np.zeros((2, 1000), np.float32)})
    with pytest.raises(ValueError, match="too few"):
        LogMel(pad_to_seconds=None).fn({"audio": np.zeros(100, np.float32)})
