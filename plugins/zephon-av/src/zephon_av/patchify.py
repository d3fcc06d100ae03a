"""``patchify_video``: sampled frames ``(T, H, W, C)`` → ``pixel_values_videos`` and ``video_grid_thw``.

The layout of ``zephon-vision``'s ``patchify`` (and of Qwen2-VL's image processor) for video:

* ``uint8`` frames are normalized to float32 ``x * a + b`` with ``a = rescale / std`` and
  ``b = -mean / std`` (CLIP's statistics by default, as Qwen2-VL); float frames are kept as given.
* Frames go in pairs (``temporal_patch_size``); an odd count repeats the last frame.
* With ``grid_h = H / patch_size``, ``grid_w = W / patch_size`` and ``m = merge_size``, row
  ``r = (((t * grid_h/m + bh) * grid_w/m + bw) * m + mh) * m + mw`` is the patch at temporal index
  ``t``, patch row ``bh * m + mh``, patch column ``bw * m + mw``; each row holds ``C *
  temporal_patch_size * patch_size²`` values in ``(channel, frame, y, x)`` order.

Frames must already have sides that are multiples of ``patch_size * merge_size``: decode them with
``decode_video(size_factor=patch_size * merge_size, max_pixels=...)`` (resizing there, in FFmpeg,
costs less than resizing decoded frames again). The LLM sees ``t * h * w // merge_size²`` video tokens.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from zephon_av.base import MediaFn, MediaOperator, Payload, check_field, positive_int
from zephon_core.plugin_api import ConfigError

CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


def temporal_patches(
    frames: np.ndarray, patch_size: int, temporal_patch_size: int, merge_size: int
) -> tuple[np.ndarray, tuple[int, int, int]]:
    """``(T, H, W, C)`` float frames → ``(grid_t * grid_h * grid_w, C * tps * ps * ps)`` and the grid."""
    t, height, width, channels = frames.shape
    pad = -t % temporal_patch_size
    if pad:
        frames = np.concatenate([frames, np.repeat(frames[-1:], pad, axis=0)], axis=0)
    grid_t = frames.shape[0] // temporal_patch_size
    grid_h, grid_w = height // patch_size, width // patch_size
    m, ps, tps = merge_size, patch_size, temporal_patch_size
    x = frames.reshape(grid_t, tps, grid_h // m, m, ps, grid_w // m, m, ps, channels)
    # axes: 0 t, 1 frame, 2 bh, 3 mh, 4 y, 5 bw, 6 mw, 7 x, 8 c → rows (t, bh, bw, mh, mw), columns (c, frame, y, x)
    x = x.transpose(0, 2, 5, 3, 6, 8, 1, 4, 7)
    return np.ascontiguousarray(x).reshape(grid_t * grid_h * grid_w, channels * tps * ps * ps), (grid_t, grid_h, grid_w)


@dataclass(frozen=True)
class PatchifyVideoFn(MediaFn):
    field: str
    patch_size: int
    temporal_patch_size: int
    merge_size: int
    mean: tuple[float, ...] | None
    std: tuple[float, ...] | None
    rescale: float
    out_patches: str
    out_grid: str
    keep_video: bool

    def __call__(self, payload: Payload) -> Payload:
        try:
            frames = payload[self.field]
        except KeyError:
            raise KeyError(
                f"patchify_video: the record has no field {self.field!r} (fields: {sorted(payload)})"
            ) from None
        if not isinstance(frames, np.ndarray) or frames.ndim != 4 or len(frames) == 0:
            shape = getattr(frames, "shape", None)
            raise TypeError(
                f"patchify_video: field {self.field!r} must be (T, H, W, C) frames, got {type(frames).__name__}"
                + (f" of shape {shape}" if shape is not None else "")
                + " (decode with decode_video first)"
            )
        _, height, width, channels = frames.shape
        factor = self.patch_size * self.merge_size
        if height % factor or width % factor:
            raise ValueError(
                f"patchify_video: {height}x{width} frames are not multiples of patch_size * merge_size = {factor} "
                f"(decode with decode_video(size_factor={factor}, max_pixels=...))"
            )
        if frames.dtype.kind in "ui":
            if self.mean is not None and self.std is not None:
                if len(self.mean) not in (1, channels):
                    raise ValueError(f"patchify_video: {len(self.mean)} means for frames with {channels} channels")
                m = np.broadcast_to(np.asarray(self.mean, np.float64), (channels,))
                s = np.broadcast_to(np.asarray(self.std, np.float64), (channels,))
                a, b = (self.rescale / s).astype(np.float32), (-m / s).astype(np.float32)
            else:
                a, b = np.full(channels, self.rescale, np.float32), np.zeros(channels, np.float32)
            data = frames.astype(np.float32)
            data *= a
            data += b
        else:
            data = frames.astype(np.float32, copy=False)
        patches, grid = temporal_patches(data, self.patch_size, self.temporal_patch_size, self.merge_size)
        out = dict(payload) if self.keep_video else {k: v for k, v in payload.items() if k != self.field}
        out[self.out_patches] = patches
        out[self.out_grid] = np.asarray(grid, dtype=np.int64)
        return out


def _stats(values: Sequence[float] | None, what: str, name: str, positive: bool) -> tuple[float, ...] | None:
    if values is None:
        return None
    ok = isinstance(values, (tuple, list)) and len(values) >= 1
    ok = ok and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and (v > 0 or not positive)
        for v in values
    )
    if not ok:
        raise ConfigError(
            f"{what}: {name} must be a non-empty sequence of finite numbers{' > 0' if positive else ''}, got {values!r}"
        )
    return tuple(float(v) for v in values)


class PatchifyVideo(MediaOperator):
    """Frames → ``pixel_values_videos`` + ``video_grid_thw``, Qwen2-VL style (module docstring).

    Args:
        patch_size: side of a square patch in pixels.
        temporal_patch_size: frames per patch (an odd count repeats the last frame).
        merge_size: patches per side of a merge window (one LLM token per ``merge_size²`` patches).
        mean: per-channel means for ``uint8`` frames (default CLIP's); None: rescale only.
        std: per-channel standard deviations (default CLIP's).
        rescale: factor applied to ``uint8`` frames before mean/std.
        field: the frames' field (from ``decode_video``).
        out_patches: the patches' field.
        out_grid: the grid's field.
        keep_video: keep the frames' field.
    """

    kind = "patchify_video"

    def __init__(
        self,
        patch_size: int = 14,
        *,
        temporal_patch_size: int = 2,
        merge_size: int = 2,
        mean: Sequence[float] | None = CLIP_MEAN,
        std: Sequence[float] | None = CLIP_STD,
        rescale: float = 1 / 255,
        field: str = "video",
        out_patches: str = "pixel_values_videos",
        out_grid: str = "video_grid_thw",
        keep_video: bool = False,
        parallelism: int = 1,
        runner: str | None = None,
        name: str | None = None,
        timeout_s: float | None = None,
    ) -> None:
        what = "patchify_video"
        ps = positive_int(patch_size, what, "patch_size")
        tps = positive_int(temporal_patch_size, what, "temporal_patch_size")
        m = positive_int(merge_size, what, "merge_size")
        assert ps is not None and tps is not None and m is not None
        if (mean is None) != (std is None):
            raise ConfigError(f"{what}: give both mean and std, or neither")
        if isinstance(rescale, bool) or not isinstance(rescale, (int, float)) or not math.isfinite(rescale):
            raise ConfigError(f"{what}: rescale must be a finite number, got {rescale!r}")
        fn = PatchifyVideoFn(
            field=check_field(field, what),
            patch_size=ps,
            temporal_patch_size=tps,
            merge_size=m,
            mean=_stats(mean, what, "mean", positive=False),
            std=_stats(std, what, "std", positive=True),
            rescale=float(rescale),
            out_patches=check_field(out_patches, what),
            out_grid=check_field(out_grid, what),
            keep_video=bool(keep_video),
        )
        super().__init__(fn, parallelism=parallelism, runner=runner, name=name, timeout_s=timeout_s)
