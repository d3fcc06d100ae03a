"""``decode_audio``: encoded audio bytes (FLAC, WAV, MP3, AAC, Opus, or a video's sound track) → float32 PCM.

The first audio stream is decoded and converted by FFmpeg's resampler (swresample) to planar float32
at ``sample_rate`` with ``layout``'s channels: ``(channels, samples)``. With ``clip_seconds`` only a
window is kept — exactly ``round(clip_seconds * sample_rate)`` samples, zero-padded when the audio
is shorter — starting at ``floor(u * (total - n))`` output samples, with ``u`` the record's draw from
the kernel's per-sample generator (``clip_start="random"``), 0 (``"start"``) or 1/2 (``"center"``);
``total`` comes from the packets' timestamps (the demuxer's index, no decoding). Decoding stops
after the window, and only the window's samples are kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

import numpy as np

from zephon_av.base import (
    LRUCache,
    MediaDecodeError,
    MediaFn,
    MediaOperator,
    Payload,
    check_field,
    check_fields,
    check_on_error,
    content_key,
    describe,
    encoded,
    find_field,
    open_input,
    positive_int,
)
from zephon_av.sampling import draw
from zephon_av.video import check_clip
from zephon_core.plugin_api import ConfigError

LAYOUTS = {"mono": 1, "stereo": 2}
DURATION_CACHE = LRUCache(4096)


def audio_duration(data: bytes) -> Fraction:
    """Seconds of the first audio stream, from its packets' timestamps and durations (no decoding)."""

    def build() -> Fraction:
        with open_input(data) as container:
            if not container.streams.audio:
                kinds = sorted({s.type for s in container.streams}) or ["none"]
                raise MediaDecodeError(f"no audio stream (streams: {', '.join(kinds)})")
            stream = container.streams.audio[0]
            first: int | None = None
            end = 0
            for packet in container.demux(stream):
                if packet.size == 0 or packet.pts is None or packet.is_discard:
                    continue
                first = packet.pts if first is None else min(first, packet.pts)
                end = max(end, packet.pts + (packet.duration or 0))
            if first is None:
                return Fraction(0)
            return Fraction(max(0, end - first)) * Fraction(stream.time_base)

    return DURATION_CACHE.get_or_build(content_key(data, "audio"), build)


def decode_pcm(data: bytes, *, sample_rate: int, layout: str, start: int = 0, count: int | None = None) -> np.ndarray:
    """``(channels, samples)`` float32 of the first audio stream, output samples ``[start, start + count)``.

    With ``count`` the result has exactly ``count`` samples (zeros past the end of the audio).
    """
    import av

    channels = LAYOUTS.get(layout, 0) or av.AudioLayout(layout).nb_channels
    pieces: list[np.ndarray] = []
    seen = kept = 0
    with open_input(data) as container:
        if not container.streams.audio:
            kinds = sorted({s.type for s in container.streams}) or ["none"]
            raise MediaDecodeError(f"no audio stream (streams: {', '.join(kinds)})")
        stream = container.streams.audio[0]
        resampler = av.AudioResampler(format="fltp", layout=layout, rate=sample_rate)

        def take(frames: list[av.AudioFrame]) -> bool:
            nonlocal seen, kept
            for frame in frames:
                array = frame.to_ndarray()
                lo, hi = max(0, start - seen), array.shape[1]
                if count is not None:
                    hi = min(hi, start + count - seen)
                if hi > lo:
                    pieces.append(array[:, lo:hi])
                    kept += hi - lo
                seen += array.shape[1]
                if count is not None and kept >= count:
                    return True
            return False

        done = False
        for frame in container.decode(stream):
            if take(resampler.resample(frame)):
                done = True
                break
        if not done:
            take(resampler.resample(None))
    if count is None and kept == 0:
        raise MediaDecodeError("the audio stream holds no samples")
    pcm = np.concatenate(pieces, axis=1) if pieces else np.zeros((channels, 0), np.float32)
    if count is not None and pcm.shape[1] < count:
        pcm = np.pad(pcm, ((0, 0), (0, count - pcm.shape[1])))
    return np.ascontiguousarray(pcm, dtype=np.float32)


@dataclass(frozen=True)
class DecodeAudioFn(MediaFn):
    """The per-record function of :class:`DecodeAudio` (its fields are the configuration)."""

    field: tuple[str, ...]
    out: str
    offset: str
    sample_rate: int
    layout: str
    clip_seconds: float | None
    clip_start: str
    on_error: str
    keep_encoded: bool

    def __call__(self, payload: Payload) -> Payload | None:
        return self.run(payload, None)

    def run(self, payload: Payload, rng: np.random.Generator | None) -> Payload | None:
        name = find_field(payload, self.field, "decode_audio")
        data = encoded(payload, name, "decode_audio")
        start = 0
        u = draw(self.clip_start, rng) if self.clip_seconds is not None else Fraction(0)
        try:
            if self.clip_seconds is None:
                pcm = decode_pcm(data, sample_rate=self.sample_rate, layout=self.layout)
            else:
                count = max(1, round(Fraction(self.clip_seconds) * self.sample_rate))
                total = int(audio_duration(data) * self.sample_rate)
                if total == 0:
                    raise MediaDecodeError("the audio stream holds no samples")
                start = int(u * max(0, total - count))
                pcm = decode_pcm(data, sample_rate=self.sample_rate, layout=self.layout, start=start, count=count)
        except Exception as exc:  # FFmpeg's errors (av.error.*), a missing stream, no samples
            if self.on_error == "skip":
                return None  # the kernel records a tombstone for the sample
            reason = str(exc) if isinstance(exc, MediaDecodeError) else f"{type(exc).__name__}: {exc}"
            raise MediaDecodeError(
                f"decode_audio: field {name!r} ({describe(data)}) is not decodable audio: {reason}"
                " (pass on_error='skip' to drop undecodable audio)"
            ) from exc
        out = payload if self.keep_encoded else {k: v for k, v in payload.items() if k not in self.field}
        return {**out, self.out: pcm, self.offset: start / self.sample_rate}


@dataclass(frozen=True)
class RandomDecodeAudioFn(DecodeAudioFn):
    """:class:`DecodeAudioFn` with a random clip start: takes the kernel's per-record generator."""

    def __call__(self, payload: Payload, rng: np.random.Generator) -> Payload | None:  # type: ignore[override]
        return self.run(payload, rng)


class DecodeAudio(MediaOperator):
    """Decode audio to float32 PCM ``(channels, samples)`` at a sample rate and layout (module docstring).

    Args:
        field: the field holding the bytes, or candidates (e.g. ``("flac", "wav", "mp3")``).
        out: the field the PCM goes to.
        offset: the field of the clip's start in seconds (0 without ``clip_seconds``).
        sample_rate: output samples per second (FFmpeg resamples).
        channels: 1 (mono, down-mixed) or 2 (stereo); or give ``layout``.
        layout: an FFmpeg channel layout name (``"mono"``, ``"stereo"``, ``"5.1"``, ...).
        clip_seconds: keep a window of this length (zero-padded when the audio is shorter).
        clip_start: ``"random"`` (per-record generator, varied by ``seed``), ``"start"`` or ``"center"``.
        on_error: ``"raise"`` (an error naming the sample) or ``"skip"`` (a tombstone).
        errors: alias of ``on_error``.
        keep_encoded: keep the encoded bytes in the record.
        seed: varies the random clip starts.
    """

    kind = "decode_audio"

    def __init__(
        self,
        field: str | Sequence[str] = "audio",
        *,
        out: str = "audio",
        offset: str = "audio_offset",
        sample_rate: int = 16000,
        channels: int | None = None,
        layout: str | None = None,
        clip_seconds: float | None = None,
        clip_start: Literal["random", "start", "center"] = "random",
        on_error: Literal["raise", "skip"] = "raise",
        errors: Literal["raise", "skip"] | None = None,
        keep_encoded: bool = False,
        seed: int = 0,
        parallelism: int = 1,
        runner: str | None = None,
        name: str | None = None,
        timeout_s: float | None = None,
    ) -> None:
        what = "decode_audio"
        fields = check_fields(field, what)
        rate = positive_int(sample_rate, what, "sample_rate")
        assert rate is not None
        if channels is not None and layout is not None:
            raise ConfigError(f"{what}: give channels or layout, not both")
        if layout is None:
            if channels not in (None, 1, 2):
                raise ConfigError(f"{what}: channels must be 1 or 2 (or give an FFmpeg layout), got {channels!r}")
            layout = "stereo" if channels == 2 else "mono"
        else:
            import av

            try:
                av.AudioLayout(layout)
            except Exception:
                raise ConfigError(
                    f"{what}: layout {layout!r} is not an FFmpeg channel layout (e.g. 'mono', 'stereo', '5.1')"
                ) from None
        seconds, start = check_clip(clip_seconds, clip_start, what)
        cls = RandomDecodeAudioFn if seconds is not None and start == "random" else DecodeAudioFn
        fn = cls(
            field=fields,
            out=check_field(out, what),
            offset=check_field(offset, what),
            sample_rate=rate,
            layout=layout,
            clip_seconds=seconds,
            clip_start=start if seconds is not None else "start",
            on_error=check_on_error(on_error, errors, what),
            keep_encoded=bool(keep_encoded),
        )
        super().__init__(fn, seed=seed, parallelism=parallelism, runner=runner, name=name, timeout_s=timeout_s)
