"""Small test clips encoded with PyAV (FFmpeg's own encoders, bundled in its wheels): no data files.

The pictures are moving patterns (a travelling gradient, a bouncing box, per-frame noise) so every
frame differs from its neighbours and a frame taken in the wrong place shows; the sound is a chirp
with harmonics and a little noise. Everything is deterministic (local generators, fixed seeds).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from fractions import Fraction

import numpy as np


def moving_frames(n: int, height: int = 48, width: int = 64, seed: int = 0) -> np.ndarray:
    """``(n, height, width, 3)`` ``uint8`` frames of a pattern that moves every frame."""
    rng = np.random.default_rng(seed)  # test data, not pipeline randomness
    y, x = np.mgrid[0:height, 0:width]
    out = np.empty((n, height, width, 3), np.uint8)
    phase = int(rng.integers(0, 256))
    for i in range(n):
        r = (x * 4 + i * 9 + phase) % 256
        g = (y * 5 + i * 5) % 256
        b = ((x + y) * 3 + i * 17) % 256
        frame = np.stack([r, g, b], axis=-1).astype(np.uint8)
        top, left = (i * 3) % max(1, height - 12), (i * 5) % max(1, width - 12)
        frame[top : top + 12, left : left + 12] = (255 - 10 * (i % 20), 40, 200)
        frame ^= rng.integers(0, 16, size=frame.shape, dtype=np.uint8)
        out[i] = frame
    return out


def encode_video(
    frames: np.ndarray,
    *,
    codec: str = "libx264",
    container: str = "mp4",
    fps: int = 10,
    gop: int = 8,
    b_frames: int = 2,
    durations_ms: Sequence[int] | None = None,
    audio: np.ndarray | None = None,
    sample_rate: int = 16000,
) -> bytes:
    """Encode ``(T, H, W, 3)`` frames (even sides) as ``codec`` in ``container``.

    ``gop`` is the keyframe interval; ``b_frames`` the B-frames between references (H.264).
    ``durations_ms`` makes a variable-frame-rate clip: frame ``i`` is shown for
    ``durations_ms[i % len(durations_ms)]`` milliseconds. ``audio`` (``(channels, samples)``
    float32) adds an AAC/Opus track.
    """
    import av

    buf = io.BytesIO()
    with av.open(buf, "w", format=container) as out:
        stream = out.add_stream(codec, rate=fps)
        stream.width, stream.height = frames.shape[2], frames.shape[1]
        stream.pix_fmt = "yuv420p"
        ctx = stream.codec_context
        ctx.gop_size = gop
        options = {"g": str(gop)}
        if codec == "libx264":
            ctx.max_b_frames = b_frames
            options.update({"bf": str(b_frames), "sc_threshold": "0", "keyint_min": str(gop), "preset": "veryfast"})
        elif codec == "libvpx-vp9":
            options.update({"deadline": "realtime", "cpu-used": "8", "lag-in-frames": "0"})
        ctx.options = options
        time_base = Fraction(1, 1000) if durations_ms is not None else Fraction(1, fps)
        ctx.time_base = time_base
        audio_stream = None
        if audio is not None:
            audio_stream = out.add_stream(
                "aac" if container == "mp4" else "libopus", rate=sample_rate if container == "mp4" else 48000
            )
        t = 0
        for i, array in enumerate(frames):
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(array), format="rgb24")
            frame.pts, frame.time_base = t, time_base
            t += durations_ms[i % len(durations_ms)] if durations_ms is not None else 1
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
        if audio_stream is not None and audio is not None:
            _write_audio(out, audio_stream, audio, sample_rate)
    return buf.getvalue()


def chirp(seconds: float, sample_rate: int = 16000, channels: int = 1, seed: int = 0) -> np.ndarray:
    """``(channels, samples)`` float32 in [-1, 1]: a rising tone with harmonics and some noise."""
    rng = np.random.default_rng(seed)
    n = round(seconds * sample_rate)
    t = np.arange(n) / sample_rate
    f0 = 150 + 60 * seed % 200
    phase = 2 * np.pi * (f0 * t + 0.5 * (1500 / max(seconds, 1e-3)) * t * t)
    base = 0.4 * np.sin(phase) + 0.15 * np.sin(2 * phase) + 0.05 * np.sin(3 * phase)
    envelope = 0.6 + 0.4 * np.sin(2 * np.pi * 1.3 * t)
    out = np.empty((channels, n), np.float32)
    for c in range(channels):
        out[c] = (base * envelope * (1 - 0.3 * c) + 0.01 * rng.standard_normal(n)).astype(np.float32)
    return out


def _write_audio(out: object, stream: object, audio: np.ndarray, sample_rate: int) -> None:
    import av

    layout = "mono" if audio.shape[0] == 1 else "stereo"
    resampler = None
    codec_rate = stream.codec_context.sample_rate  # type: ignore[attr-defined]
    fmt = stream.codec_context.format.name  # type: ignore[attr-defined]
    frame_size = stream.codec_context.frame_size or 1024  # type: ignore[attr-defined]
    resampler = av.AudioResampler(format=fmt, layout=layout, rate=codec_rate)
    fifo = av.AudioFifo()
    step = 4096
    for start in range(0, audio.shape[1], step):
        frame = av.AudioFrame.from_ndarray(
            np.ascontiguousarray(audio[:, start : start + step]), format="fltp", layout=layout
        )
        frame.sample_rate = sample_rate
        for converted in resampler.resample(frame):
            fifo.write(converted)
    for converted in resampler.resample(None):
        fifo.write(converted)
    while fifo.samples > 0:
        chunk = fifo.read(min(frame_size, fifo.samples))
        for packet in stream.encode(chunk):  # type: ignore[attr-defined]
            out.mux(packet)  # type: ignore[attr-defined]
    for packet in stream.encode(None):  # type: ignore[attr-defined]
        out.mux(packet)  # type: ignore[attr-defined]


def encode_audio(audio: np.ndarray, *, sample_rate: int = 16000, codec: str = "flac", container: str = "flac") -> bytes:
    """Encode ``(channels, samples)`` float32 audio (``codec``: flac, pcm_s16le/wav, libopus/ogg, aac/mp4)."""
    import av

    buf = io.BytesIO()
    rate = 48000 if codec == "libopus" else sample_rate
    with av.open(buf, "w", format=container) as out:
        stream = out.add_stream(codec, rate=rate, layout="mono" if audio.shape[0] == 1 else "stereo")
        _write_audio(out, stream, audio, sample_rate)
    return buf.getvalue()


def video_records(
    n: int, *, seconds: float = 2.0, fps: int = 10, field: str = "video", seed: int = 0
) -> list[dict[str, object]]:
    """``n`` records ``{field: mp4 bytes, "n": i}`` of H.264 clips with B-frames, lengths varying."""
    out: list[dict[str, object]] = []
    for i in range(n):
        frames = round(seconds * fps) + (i % 5) * 2
        data = encode_video(moving_frames(frames, seed=seed + i), fps=fps, gop=6 + i % 4)
        out.append({field: data, "n": i})
    return out


def audio_records(n: int, *, seconds: float = 1.0, field: str = "audio", seed: int = 0) -> list[dict[str, object]]:
    """``n`` records ``{field: FLAC bytes, "n": i}`` of chirps of varying length."""
    return [{field: encode_audio(chirp(seconds + 0.1 * (i % 4), seed=seed + i)), "n": i} for i in range(n)]
