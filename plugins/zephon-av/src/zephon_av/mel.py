"""``log_mel``: mono PCM → Whisper's log-mel spectrogram ``(n_mels, frames)`` float32, in numpy.

The formula of Whisper's ``log_mel_spectrogram`` (and of ``transformers``' ``WhisperFeatureExtractor``,
which the tests compare against to 1e-4):

1. optionally pad (zeros) or trim the audio to ``pad_to_seconds`` (Whisper: 30 s, 3000 frames);
2. STFT: periodic Hann window of ``n_fft`` (400 = 25 ms at 16 kHz), hop ``hop_length`` (160 = 10
   ms), centred frames (the signal reflect-padded by ``n_fft // 2``), power ``|X|²``, last frame dropped;
3. mel filter bank: Slaney's mel scale with Slaney's area normalization (librosa's
   ``filters.mel``, from which Whisper's bundled filters were made), 0 Hz to ``sample_rate / 2``;
4. ``log10(max(mel, 1e-10))``, floored at its maximum minus 8, then ``(x + 4) / 4``.

Computed in float64 (numpy's pocketfft), returned as float32.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from zephon_av.base import MediaFn, MediaOperator, Payload, check_field, positive_int, positive_number
from zephon_core.plugin_api import ConfigError


def hz_to_mel(hz: np.ndarray) -> np.ndarray:
    """Slaney's mel scale: linear below 1 kHz, logarithmic above (librosa ``htk=False``)."""
    f_sp = 200.0 / 3
    mels = hz / f_sp
    min_log_hz, min_log_mel, logstep = 1000.0, 1000.0 / f_sp, math.log(6.4) / 27.0
    above = hz >= min_log_hz
    return np.where(above, min_log_mel + np.log(np.maximum(hz, min_log_hz) / min_log_hz) / logstep, mels)


def mel_to_hz(mels: np.ndarray) -> np.ndarray:
    f_sp = 200.0 / 3
    freqs = f_sp * mels
    min_log_hz, min_log_mel, logstep = 1000.0, 1000.0 / f_sp, math.log(6.4) / 27.0
    above = mels >= min_log_mel
    return np.where(above, min_log_hz * np.exp(logstep * (mels - min_log_mel)), freqs)


@functools.lru_cache(maxsize=16)
def mel_filters(sample_rate: int, n_fft: int, n_mels: int) -> np.ndarray:
    """``(n_mels, 1 + n_fft // 2)`` triangular filters, Slaney-normalized (librosa's ``filters.mel``)."""
    fft_freqs = np.linspace(0, sample_rate / 2, 1 + n_fft // 2)
    mel_pts = mel_to_hz(np.linspace(hz_to_mel(np.array(0.0)), hz_to_mel(np.array(sample_rate / 2)), n_mels + 2))
    fdiff = np.diff(mel_pts)
    ramps = mel_pts[:, None] - fft_freqs[None, :]
    lower = -ramps[:-2] / fdiff[:-1, None]
    upper = ramps[2:] / fdiff[1:, None]
    weights = np.maximum(0, np.minimum(lower, upper))
    weights *= (2.0 / (mel_pts[2 : n_mels + 2] - mel_pts[:n_mels]))[:, None]
    weights.setflags(write=False)
    return weights


@functools.lru_cache(maxsize=8)
def _hann(n: int) -> np.ndarray:
    window = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n) / n)  # periodic, as torch.hann_window
    window.setflags(write=False)
    return window


def log_mel_spectrogram(
    audio: np.ndarray,
    *,
    n_mels: int = 80,
    n_fft: int = 400,
    hop_length: int = 160,
    sample_rate: int = 16000,
    samples: int | None = None,
) -> np.ndarray:
    """Whisper's log-mel features of mono ``audio`` (module docstring); ``samples`` pads/trims first."""
    x = np.asarray(audio, dtype=np.float64).reshape(-1)
    if samples is not None:
        x = x[:samples] if len(x) >= samples else np.pad(x, (0, samples - len(x)))
    if len(x) <= n_fft // 2:
        raise ValueError(
            f"log_mel: {len(x)} samples are too few for n_fft={n_fft} (reflect padding needs more than {n_fft // 2})"
        )
    padded = np.pad(x, (n_fft // 2, n_fft // 2), mode="reflect")
    frames = np.lib.stride_tricks.sliding_window_view(padded, n_fft)[::hop_length]
    power = np.abs(np.fft.rfft(frames * _hann(n_fft), axis=1)) ** 2
    mel = mel_filters(sample_rate, n_fft, n_mels) @ power[:-1].T
    log_spec = np.log10(np.maximum(mel, 1e-10))
    log_spec = np.maximum(log_spec, log_spec.max() - 8.0)
    result: np.ndarray = ((log_spec + 4.0) / 4.0).astype(np.float32)
    return result


@dataclass(frozen=True)
class LogMelFn(MediaFn):
    field: str
    out: str
    n_mels: int
    n_fft: int
    hop_length: int
    sample_rate: int
    pad_to_seconds: float | None
    keep_audio: bool

    def __call__(self, payload: Payload) -> Payload:
        try:
            audio = payload[self.field]
        except KeyError:
            raise KeyError(f"log_mel: the record has no field {self.field!r} (fields: {sorted(payload)})") from None
        if not isinstance(audio, np.ndarray) or not (audio.ndim == 1 or (audio.ndim == 2 and audio.shape[0] == 1)):
            shape = getattr(audio, "shape", None)
            raise TypeError(
                f"log_mel: field {self.field!r} must be mono PCM, (samples,) or (1, samples); got {type(audio).__name__}"
                + (f" of shape {shape}" if shape is not None else "")
                + " (decode with decode_audio(channels=1) first)"
            )
        samples = None if self.pad_to_seconds is None else round(self.pad_to_seconds * self.sample_rate)
        features = log_mel_spectrogram(
            audio,
            n_mels=self.n_mels,
            n_fft=self.n_fft,
            hop_length=self.hop_length,
            sample_rate=self.sample_rate,
            samples=samples,
        )
        out = dict(payload) if self.keep_audio else {k: v for k, v in payload.items() if k != self.field}
        out[self.out] = features
        return out


class LogMel(MediaOperator):
    """Whisper-style log-mel features of mono PCM (module docstring).

    Args:
        n_mels: mel bins (80: Whisper up to large-v2; 128: large-v3).
        n_fft: STFT window in samples (400 = 25 ms at 16 kHz).
        hop_length: STFT hop in samples (160 = 10 ms).
        sample_rate: the audio's sample rate (decode_audio's); the filters span 0 to half of it.
        pad_to_seconds: pad with zeros or trim to this length first (Whisper: 30); None: as is.
        field: the PCM field (from ``decode_audio``).
        out: the features' field (``(n_mels, frames)`` float32; Whisper's ``input_features``).
        keep_audio: keep the PCM field.
    """

    kind = "log_mel"

    def __init__(
        self,
        n_mels: int = 80,
        *,
        n_fft: int = 400,
        hop_length: int = 160,
        sample_rate: int = 16000,
        pad_to_seconds: float | None = 30.0,
        field: str = "audio",
        out: str = "input_features",
        keep_audio: bool = False,
        parallelism: int = 1,
        runner: str | None = None,
        name: str | None = None,
        timeout_s: float | None = None,
    ) -> None:
        what = "log_mel"
        mels = positive_int(n_mels, what, "n_mels")
        fft = positive_int(n_fft, what, "n_fft")
        hop = positive_int(hop_length, what, "hop_length")
        rate = positive_int(sample_rate, what, "sample_rate")
        assert mels is not None and fft is not None and hop is not None and rate is not None
        if fft < 2:
            raise ConfigError(f"{what}: n_fft must be at least 2, got {fft}")
        fn = LogMelFn(
            field=check_field(field, what),
            out=check_field(out, what),
            n_mels=mels,
            n_fft=fft,
            hop_length=hop,
            sample_rate=rate,
            pad_to_seconds=positive_number(pad_to_seconds, what, "pad_to_seconds", allow_none=True),
            keep_audio=bool(keep_audio),
        )
        super().__init__(fn, parallelism=parallelism, runner=runner, name=name, timeout_s=timeout_s)
