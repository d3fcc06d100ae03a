"""``decode_video``: encoded video bytes (MP4/H.264, WebM/VP9, ...) → sampled frames ``(T, H, W, 3)`` ``uint8``.

Decoding only what is needed:

1. **Index** (once per file, cached in memory by content hash): the demuxer reads every packet
   header without decoding — presentation timestamps in order and which packets are keyframes. Packets FFmpeg marks to discard (before an MP4 edit list's start)
   are not frames.
2. **Choose** frames from the index (:mod:`zephon_av.sampling`): a pure function of the file, the
   options and, for a random clip, the record's draw from the kernel's per-sample generator.
3. **Decode** runs of frames: seek to the keyframe before the first wanted frame of a run, decode
   until its last wanted frame, keep only the wanted ones (converted to RGB, resized by FFmpeg's
   swscale). A wanted frame one keyframe interval ahead is reached by decoding on; a farther one by
   seeking again. Memory holds the frames kept, not the clip: a 10-minute 1080p video is never
   decoded whole.

Frames are matched by timestamp, so what comes out is exactly what decoding the whole file and
picking the same frames gives (the tests check it on B-frames, VFR and non-keyframe starts). If a
seek lands somewhere unexpected and a wanted frame is missing, the frames are decoded again from
the start of the file; a frame that is still missing is a decode error.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal

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
    positive_number,
)
from zephon_av.sampling import CLIP_STARTS, FramePolicy, draw, select
from zephon_core.plugin_api import ConfigError

INTERPOLATIONS = ("fast_bilinear", "bilinear", "bicubic", "area", "point", "lanczos")
"""FFmpeg swscale filters accepted by ``interpolation``."""
INDEX_CACHE = LRUCache(4096)
"""Per-process cache of video indexes, keyed by content hash and stream."""


@dataclass(frozen=True)
class VideoIndex:
    """What the demuxer tells about one video stream without decoding (module docstring)."""

    stream: int
    time_base: Fraction
    pts: np.ndarray
    """Presentation timestamps of the frames, sorted (ticks of ``time_base``)."""
    key_pts: np.ndarray
    """Presentation timestamps of the keyframes, sorted (what a backward seek to one of them lands on)."""
    end: int
    """Timestamp just after the last frame (its pts plus its duration)."""
    width: int
    height: int


def build_index(data: bytes) -> VideoIndex:
    """Index the first video stream of ``data``; :class:`MediaDecodeError` if there is none or no frame."""
    with open_input(data) as container:
        if not container.streams.video:
            kinds = sorted({s.type for s in container.streams}) or ["none"]
            raise MediaDecodeError(f"no video stream (streams: {', '.join(kinds)})")
        stream = container.streams.video[0]
        if stream.time_base is None:
            raise MediaDecodeError("the video stream has no time base")
        pts: list[int] = []
        keys: list[int] = []
        durations: list[int] = []
        for packet in container.demux(stream):
            if packet.size == 0 or packet.pts is None or packet.is_discard:
                continue
            pts.append(packet.pts)
            durations.append(packet.duration or 0)
            if packet.is_keyframe:
                keys.append(packet.pts)
        width, height = stream.codec_context.width, stream.codec_context.height
        time_base = Fraction(stream.time_base)
        stream_index = int(stream.index)
    if not pts:
        raise MediaDecodeError("the video stream holds no frames")
    if not keys:
        raise MediaDecodeError("the video stream has no keyframe")
    if width < 1 or height < 1:
        raise MediaDecodeError(f"the video stream has no frame size ({width}x{height})")
    order = np.argsort(np.asarray(pts, dtype=np.int64), kind="stable")
    sorted_pts = np.asarray(pts, dtype=np.int64)[order]
    gaps = np.diff(sorted_pts)
    last = int(order[-1])
    tail = durations[last] if durations[last] > 0 else (int(np.median(gaps)) if len(gaps) else 1)
    keys.sort()
    return VideoIndex(
        stream=stream_index,
        time_base=time_base,
        pts=sorted_pts,
        key_pts=np.asarray(keys, dtype=np.int64),
        end=int(sorted_pts[-1]) + max(1, tail),
        width=int(width),
        height=int(height),
    )


def video_index(data: bytes) -> VideoIndex:
    """The (cached) index of ``data``."""
    return INDEX_CACHE.get_or_build(content_key(data, "video"), lambda: build_index(data))


def frame_size(
    height: int,
    width: int,
    *,
    size: int | tuple[int, int] | None,
    min_pixels: int | None,
    max_pixels: int | None,
    factor: int,
) -> tuple[int, int]:
    """The (height, width) frames come out at.

    ``size``: ``(h, w)`` exactly, or an int for the shorter side (the longer ``long * size //
    short``, as ``resize``). Otherwise, with ``max_pixels``/``min_pixels``/``factor``, Qwen2-VL's
    ``smart_resize`` (as ``patchify`` computes it): both sides rounded to multiples of ``factor``,
    scaled into the pixel bounds, no side below ``factor``. Neither: the stream's own size.
    """
    if isinstance(size, tuple):
        return size
    if isinstance(size, int):
        short, long = (height, width) if height <= width else (width, height)
        new_long = max(1, long * size // short)
        return (size, new_long) if height <= width else (new_long, size)
    if max_pixels is None and min_pixels is None and factor == 1:
        return height, width
    hi = max_pixels if max_pixels is not None else 1 << 62
    lo = min_pixels if min_pixels is not None else 0
    h_bar = max(factor, round(height / factor) * factor)
    w_bar = max(factor, round(width / factor) * factor)
    if h_bar * w_bar > hi:
        beta = math.sqrt(height * width / hi)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < lo:
        beta = math.sqrt(lo / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    if h_bar * w_bar > hi:  # a side held at `factor` overflowed: shorten the long side
        if h_bar >= w_bar:
            h_bar = max(factor, hi // w_bar // factor * factor)
        else:
            w_bar = max(factor, hi // h_bar // factor * factor)
    return h_bar, w_bar


def _frames(container: Any, stream: Any, want: set[int]) -> Iterator[Any]:
    """Decoded frames from the container's current position (the final empty packet flushes the decoder).

    A packet whose frame is not wanted is decoded with ``skip_frame="NONREF"``: the decoder still
    decodes it if other frames refer to it, and drops it unread otherwise (the B-frames between
    wanted frames), so the frames that come out are bit for bit the same, for less work. FFmpeg
    reads the option at each packet, frame threads included.
    """
    ctx = stream.codec_context
    current = ctx.skip_frame
    for packet in container.demux(stream):
        skip = "DEFAULT" if packet.pts is None or packet.pts in want else "NONREF"
        if skip != current:
            ctx.skip_frame = current = skip
        yield from packet.decode()


def decode_frames(
    data: bytes, index: VideoIndex, positions: np.ndarray, *, height: int, width: int, interpolation: str, threads: int
) -> np.ndarray:
    """The frames at ``positions`` (into ``index.pts``) as ``(T, height, width, 3)`` ``uint8`` (module docstring)."""
    wanted_pts = index.pts[positions]
    wanted = sorted(set(int(p) for p in wanted_pts))
    native = (height, width) == (index.height, index.width)
    fmt: dict[str, Any] = {"format": "rgb24"}
    if not native:
        fmt.update(width=width, height=height, interpolation=interpolation.upper())
    got: dict[int, np.ndarray] = {}
    # runs of wanted frames that share the keyframe before them
    keyframe = np.searchsorted(index.key_pts, np.asarray(wanted, dtype=np.int64), side="right") - 1
    runs: list[tuple[int, list[int]]] = []
    for p, k in zip(wanted, keyframe.tolist()):
        if runs and runs[-1][0] == k:
            runs[-1][1].append(p)
        else:
            runs.append((max(k, 0), [p]))

    def keep(frame: Any, want: set[int]) -> None:
        if frame.pts in want and frame.pts not in got:
            got[frame.pts] = frame.to_ndarray(**fmt)

    want_set = set(wanted)
    with open_input(data) as container:
        stream = container.streams[index.stream]
        stream.codec_context.thread_count = threads
        frames: Iterator[Any] | None = None
        at_key = -2  # keyframe of the last frame decoded
        for key, run in runs:
            if frames is None or key > at_key + 1:
                container.seek(int(index.key_pts[key]), stream=stream, backward=True, any_frame=False)
                frames = _frames(container, stream, want_set)
            last = run[-1]
            for frame in frames:
                if frame.pts is None:
                    continue
                keep(frame, want_set)
                if frame.pts >= last:
                    at_key = int(np.searchsorted(index.key_pts, frame.pts, side="right")) - 1
                    break
            else:
                frames = None  # end of the stream: seek again for the next run
        missing = want_set - got.keys()
        if missing:  # a seek landed past a wanted frame: decode again from the start of the file
            container.seek(0, stream=stream, backward=True, any_frame=False)
            for frame in _frames(container, stream, missing):
                if frame.pts is not None:
                    keep(frame, missing)
                    if frame.pts >= max(missing):
                        break
            missing = want_set - got.keys()
    if missing:
        seconds = sorted(float((p - index.pts[0]) * index.time_base) for p in missing)
        raise MediaDecodeError(
            f"{len(missing)} frame(s) do not decode (at {', '.join(f'{s:.3f}' for s in seconds[:4])} s)"
        )
    return np.stack([got[int(p)] for p in wanted_pts])


@dataclass(frozen=True)
class DecodeVideoFn(MediaFn):
    """The per-record function of :class:`DecodeVideo` (its fields are the configuration)."""

    field: tuple[str, ...]
    out: str
    timestamps: str
    fps: float | None
    num_frames: int | None
    clip_seconds: float | None
    clip_start: str
    min_frames: int
    max_frames: int | None
    frame_factor: int
    size: int | tuple[int, int] | None
    min_pixels: int | None
    max_pixels: int | None
    size_factor: int
    interpolation: str
    threads: int
    on_error: str
    keep_encoded: bool

    def policy(self) -> FramePolicy:
        return FramePolicy(
            self.fps,
            self.num_frames,
            self.clip_seconds,
            self.clip_start,
            self.min_frames,
            self.max_frames,
            self.frame_factor,
        )

    def __call__(self, payload: Payload) -> Payload | None:
        return self.run(payload, None)

    def run(self, payload: Payload, rng: np.random.Generator | None) -> Payload | None:
        name = find_field(payload, self.field, "decode_video")
        data = encoded(payload, name, "decode_video")
        u = draw(self.clip_start, rng)  # drawn before decoding: a failure never shifts another record's draw
        try:
            index = video_index(data)
            positions = select(index.pts, index.end, index.time_base, self.policy(), u)
            height, width = frame_size(
                index.height,
                index.width,
                size=self.size,
                min_pixels=self.min_pixels,
                max_pixels=self.max_pixels,
                factor=self.size_factor,
            )
            frames = decode_frames(
                data,
                index,
                positions,
                height=height,
                width=width,
                interpolation=self.interpolation,
                threads=self.threads,
            )
        except Exception as exc:  # FFmpeg's errors (av.error.*), a missing stream, frames that do not decode
            if self.on_error == "skip":
                return None  # the kernel records a tombstone for the sample
            reason = str(exc) if isinstance(exc, MediaDecodeError) else f"{type(exc).__name__}: {exc}"
            raise MediaDecodeError(
                f"decode_video: field {name!r} ({describe(data)}) is not a decodable video: {reason}"
                " (pass on_error='skip' to drop undecodable videos)"
            ) from exc
        out = payload if self.keep_encoded else {k: v for k, v in payload.items() if k not in self.field}
        times = np.asarray([float((int(p) - int(index.pts[0])) * index.time_base) for p in index.pts[positions]])
        return {**out, self.out: frames, self.timestamps: times}


@dataclass(frozen=True)
class RandomDecodeVideoFn(DecodeVideoFn):
    """:class:`DecodeVideoFn` with a random clip start: takes the kernel's per-record generator."""

    def __call__(self, payload: Payload, rng: np.random.Generator) -> Payload | None:  # type: ignore[override]
        return self.run(payload, rng)


def check_clip(clip_seconds: Any, clip_start: Any, what: str) -> tuple[float | None, str]:
    seconds = positive_number(clip_seconds, what, "clip_seconds", allow_none=True)
    if clip_start not in CLIP_STARTS:
        raise ConfigError(f"{what}: clip_start must be one of {list(CLIP_STARTS)}, got {clip_start!r}")
    return seconds, clip_start


class DecodeVideo(MediaOperator):
    """Decode a sampled set of frames of an encoded video (module docstring).

    Args:
        field: the field holding the bytes, or candidates (the first present is decoded; e.g.
            ``("mp4", "webm")`` for WebDataset samples).
        out: the field the ``(T, H, W, 3)`` ``uint8`` frames go to.
        timestamps: the field of the frames' presentation times in seconds (float64, from the
            stream's first frame).
        fps: frames per second of clip to take (Qwen2-VL style); the default when ``num_frames``
            is not given is 2.
        num_frames: take this many frames, evenly spread over the clip (or the clip window).
        clip_seconds: sample from a window of this length instead of the whole clip.
        clip_start: where that window starts: ``"random"`` (the kernel's per-record generator,
            varied by ``seed``), ``"start"`` or ``"center"``.
        min_frames: take at least this many (repeating frames if the clip has fewer).
        max_frames: take at most this many.
        frame_factor: the count is a multiple of this (the encoder's temporal patch size).
        size: output ``(height, width)``, or an int for the shorter side.
        min_pixels: with ``max_pixels``/``size_factor``: frames are scaled up to at least this area.
        max_pixels: frames are scaled down to at most this area (per frame).
        size_factor: sides are rounded to multiples of this (``patch_size * merge_size`` for patchify).
        interpolation: swscale filter for resizing: one of :data:`INTERPOLATIONS`.
        threads: FFmpeg decoder threads per record (1: parallelism comes from the operator's).
        on_error: ``"raise"`` (an error naming the sample) or ``"skip"`` (a tombstone).
        errors: alias of ``on_error``.
        keep_encoded: keep the encoded bytes in the record.
        seed: varies the random clip starts.
    """

    kind = "decode_video"

    def __init__(
        self,
        field: str | Sequence[str] = "video",
        *,
        out: str = "video",
        timestamps: str = "video_timestamps",
        fps: float | None = None,
        num_frames: int | None = None,
        clip_seconds: float | None = None,
        clip_start: Literal["random", "start", "center"] = "random",
        min_frames: int = 1,
        max_frames: int | None = 768,
        frame_factor: int = 2,
        size: int | Sequence[int] | None = None,
        min_pixels: int | None = None,
        max_pixels: int | None = None,
        size_factor: int = 1,
        interpolation: str = "bilinear",
        threads: int = 1,
        on_error: Literal["raise", "skip"] = "raise",
        errors: Literal["raise", "skip"] | None = None,
        keep_encoded: bool = False,
        seed: int = 0,
        parallelism: int = 1,
        runner: str | None = None,
        name: str | None = None,
        timeout_s: float | None = None,
    ) -> None:
        what = "decode_video"
        fields = check_fields(field, what)
        if fps is not None and num_frames is not None:
            raise ConfigError(f"{what}: give fps or num_frames, not both")
        rate = positive_number(fps, what, "fps", allow_none=True)
        count = positive_int(num_frames, what, "num_frames", allow_none=True)
        if rate is None and count is None:
            rate = 2.0
        seconds, start = check_clip(clip_seconds, clip_start, what)
        factor = positive_int(frame_factor, what, "frame_factor")
        assert factor is not None
        cap = positive_int(max_frames, what, "max_frames", allow_none=True)
        if cap is not None and cap < factor:
            raise ConfigError(f"{what}: max_frames={cap} is less than frame_factor={factor}")
        lowest = positive_int(min_frames, what, "min_frames")
        assert lowest is not None
        if cap is not None and lowest > cap:
            raise ConfigError(f"{what}: min_frames={lowest} exceeds max_frames={cap}")
        checked_size: int | tuple[int, int] | None = None
        if size is not None:
            if isinstance(size, int) and not isinstance(size, bool) and size >= 1:
                checked_size = size
            elif (
                isinstance(size, (tuple, list))
                and len(size) == 2
                and all(isinstance(s, int) and not isinstance(s, bool) and s >= 1 for s in size)
            ):
                checked_size = (int(size[0]), int(size[1]))
            else:
                raise ConfigError(f"{what}: size must be an int or (height, width) of positive ints, got {size!r}")
            if min_pixels is not None or max_pixels is not None or size_factor != 1:
                raise ConfigError(f"{what}: give size, or min_pixels/max_pixels/size_factor, not both")
        sf = positive_int(size_factor, what, "size_factor")
        assert sf is not None
        lo = positive_int(min_pixels, what, "min_pixels", allow_none=True)
        hi = positive_int(max_pixels, what, "max_pixels", allow_none=True)
        if hi is not None and hi < sf * sf:
            raise ConfigError(f"{what}: max_pixels={hi} is less than one {sf}x{sf} block of size_factor")
        if lo is not None and hi is not None and lo > hi:
            raise ConfigError(f"{what}: min_pixels={lo} exceeds max_pixels={hi}")
        if interpolation not in INTERPOLATIONS:
            raise ConfigError(f"{what}: interpolation must be one of {list(INTERPOLATIONS)}, got {interpolation!r}")
        n_threads = positive_int(threads, what, "threads")
        assert n_threads is not None
        cls = RandomDecodeVideoFn if seconds is not None and start == "random" else DecodeVideoFn
        fn = cls(
            field=fields,
            out=check_field(out, what),
            timestamps=check_field(timestamps, what),
            fps=rate,
            num_frames=count,
            clip_seconds=seconds,
            clip_start=start if seconds is not None else "start",
            min_frames=lowest,
            max_frames=cap,
            frame_factor=factor,
            size=checked_size,
            min_pixels=lo,
            max_pixels=hi,
            size_factor=sf,
            interpolation=interpolation,
            threads=n_threads,
            on_error=check_on_error(on_error, errors, what),
            keep_encoded=bool(keep_encoded),
        )
        super().__init__(fn, seed=seed, parallelism=parallelism, runner=runner, name=name, timeout_s=timeout_s)
