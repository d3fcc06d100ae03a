"""``patchify``: an image (or video) → flattened patches and a ``(t, h, w)`` grid, for vision
encoders that take images at their own resolution (NaViT; Qwen2-VL and its successors).

Steps, per record (defaults are Qwen2-VL's):

1. **Size.** ``factor = patch_size * merge_size``. Both sides are rounded to multiples of
   ``factor`` (Python's ``round``, as Qwen2-VL's ``smart_resize``); if the area then exceeds the
   pixel budget the image is scaled down to fit (sides floored to multiples of ``factor``), if it
   is below ``min_pixels`` scaled up (sides ceiled). The budget is ``max_pixels``, lowered to
   ``max_patches // grid_t * patch_size²`` when ``max_patches`` is given. Unlike the reference,
   no side falls below ``factor`` and the budget always holds (a side that still overflows it
   after flooring is shortened further), so ``grid_t * grid_h * grid_w <= max_patches``.
   Images whose long side exceeds ``max_aspect_ratio`` times the short side are an error.
2. **Resize** to that size with Pillow (``interpolation``, bicubic by default) when it differs.
3. **Values.** ``uint8`` input is normalized to float32 ``(x * rescale - mean) / std`` (as the
   ``normalize`` operator computes it); float input is taken as already normalized and kept.
   ``mean=None`` skips the mean/std step (``rescale`` still applies).
4. **Frames.** An image is one frame; a ``(T, H, W, C)`` array is a video. Frames are padded to a
   multiple of ``temporal_patch_size`` by repeating the last one (an image becomes
   ``temporal_patch_size`` identical frames, as in Qwen2-VL), and ``grid_t = T' / temporal_patch_size``.
5. **Patches**, in merge-window order. With ``grid_h = H / patch_size``, ``grid_w = W / patch_size``
   and ``m = merge_size``, row ``r`` of ``pixel_values`` is the patch at temporal index ``t``,
   patch row ``bh * m + mh`` and patch column ``bw * m + mw``, where
   ``r = (((t * grid_h/m + bh) * grid_w/m + bw) * m + mh) * m + mw``: the ``m x m`` patches that
   the encoder's merger fuses into one LLM token are consecutive rows. Each row holds
   ``C * temporal_patch_size * patch_size * patch_size`` values in ``(channel, frame, y, x)``
   order — what a ``Conv3d`` patch embedding with kernel ``(temporal_patch_size, patch_size,
   patch_size)`` reads after ``view(-1, C, tps, ps, ps)``. This is exactly the layout of
   ``transformers``' ``Qwen2VLImageProcessor``.

Output fields: ``pixel_values`` (float32, ``(grid_t * grid_h * grid_w, C * tps * ps * ps)``) and
``image_grid_thw`` (int64, ``[grid_t, grid_h, grid_w]``); the image field is dropped unless
``keep_image``. The LLM sees ``grid_t * grid_h * grid_w // merge_size**2`` placeholder tokens.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from zephon_core.plugin_api import ConfigError
from zephon_vision.base import (
    MISSING_HINT,
    ImageFn,
    ImageOperator,
    Missing,
    Payload,
    check_field,
    check_interpolation,
    check_missing,
    has_image,
    resize_array,
    without,
)
from zephon_vision.normalize import CLIP_MEAN, CLIP_STD, affine, check_stats, normalize_array

QWEN2_VL_MIN_PIXELS = 56 * 56
QWEN2_VL_MAX_PIXELS = 28 * 28 * 1280


def smart_resize(
    height: int,
    width: int,
    *,
    factor: int,
    min_pixels: int,
    max_pixels: int,
    max_aspect_ratio: float = 200.0,
) -> tuple[int, int]:
    """The (height, width) an image is resized to: multiples of ``factor`` within the pixel bounds (module docstring)."""
    if height < 1 or width < 1:
        raise ValueError(f"patchify: the image is empty ({height}x{width})")
    if max(height, width) / min(height, width) > max_aspect_ratio:
        raise ValueError(
            f"patchify: aspect ratio {max(height, width) / min(height, width):.1f} of a {height}x{width} image "
            f"exceeds max_aspect_ratio={max_aspect_ratio}"
        )
    h_bar = max(factor, round(height / factor) * factor)
    w_bar = max(factor, round(width / factor) * factor)
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    if h_bar * w_bar > max_pixels:  # a side held at `factor` (or float rounding) overflowed: shorten the long side
        if h_bar >= w_bar:
            h_bar = max(factor, max_pixels // w_bar // factor * factor)
        else:
            w_bar = max(factor, max_pixels // h_bar // factor * factor)
    return h_bar, w_bar


def patchify_frames(frames: np.ndarray, patch_size: int, temporal_patch_size: int, merge_size: int) -> tuple[np.ndarray, tuple[int, int, int]]:
    """``(T, H, W, C)`` float frames (sides multiples of ``patch_size * merge_size``) → patches and grid."""
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
    patches = np.ascontiguousarray(x).reshape(grid_t * grid_h * grid_w, channels * tps * ps * ps)
    return patches, (grid_t, grid_h, grid_w)


@dataclass(frozen=True)
class PatchifyFn(ImageFn):
    field: str
    patch_size: int
    temporal_patch_size: int
    merge_size: int
    min_pixels: int
    max_pixels: int
    max_patches: int | None
    max_aspect_ratio: float
    interpolation: str
    mean: tuple[float, ...] | None
    std: tuple[float, ...] | None
    rescale: float
    out_patches: str
    out_grid: str
    keep_image: bool
    missing: Missing = "error"

    def target_size(self, height: int, width: int, frames: int) -> tuple[int, int]:
        """The resized (height, width) of an image (or of each frame of a video of ``frames`` frames)."""
        budget = self.max_pixels
        if self.max_patches is not None:
            grid_t = -(-frames // self.temporal_patch_size)
            per_frame = self.max_patches // grid_t
            budget = min(budget, per_frame * self.patch_size * self.patch_size)
        factor = self.patch_size * self.merge_size
        if budget < factor * factor:
            raise ValueError(
                f"patchify: {frames} frames leave a budget of {budget} pixels per frame, less than one "
                f"{factor}x{factor} merge window; raise max_patches"
            )
        return smart_resize(
            height, width, factor=factor, min_pixels=self.min_pixels, max_pixels=budget, max_aspect_ratio=self.max_aspect_ratio
        )

    def __call__(self, payload: Payload) -> Payload:
        if not has_image(payload, self.field):
            if self.missing == "pass":  # a text-only sample: no patches, no grid (what the packer expects)
                return payload if self.keep_image else without(payload, (self.field,))
            held = "no field" if self.field not in payload else "None in field"
            raise KeyError(f"patchify: the record has {held} {self.field!r} (fields: {sorted(payload)}); {MISSING_HINT}")
        value = payload[self.field]
        if not isinstance(value, np.ndarray) or value.ndim not in (2, 3, 4):
            raise TypeError(
                f"patchify: field {self.field!r} must be an HWC image or a THWC video array, got {type(value).__name__}"
                f"{' of shape ' + str(value.shape) if isinstance(value, np.ndarray) else ''}"
            )
        frames = value[None] if value.ndim < 4 else value
        if frames.ndim == 3:  # HW: one channel
            frames = frames[..., None]
        n, height, width, channels = frames.shape
        integer = frames.dtype.kind in "ui"  # decided before resizing, which may return float32
        size = self.target_size(height, width, n)
        if size != (height, width):
            frames = np.stack([resize_array(f, size, self.interpolation) for f in frames])
        if integer:
            if self.mean is not None and self.std is not None:
                a, b = affine(self.mean, self.std, self.rescale, channels, "patchify")
            else:
                a, b = np.full(channels, self.rescale, np.float32), np.zeros(channels, np.float32)
            data = normalize_array(frames, a, b)
        else:
            data = frames.astype(np.float32, copy=False)
        patches, grid = patchify_frames(data, self.patch_size, self.temporal_patch_size, self.merge_size)
        out = dict(payload) if self.keep_image else {k: v for k, v in payload.items() if k != self.field}
        out[self.out_patches] = patches
        out[self.out_grid] = np.asarray(grid, dtype=np.int64)
        return out


def _positive_int(value: object, what: str, name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"{what}: {name} must be a positive int, got {value!r}")
    return value


class Patchify(ImageOperator):
    """Image → ``pixel_values`` patches + ``image_grid_thw``, Qwen2-VL/NaViT style (module docstring).

    Args:
        patch_size: side of a square patch in pixels.
        temporal_patch_size: frames per patch (images are repeated to fill it).
        merge_size: patches per side of a merge window (the encoder fuses ``merge_size²`` patches
            into one LLM token); both image sides become multiples of ``patch_size * merge_size``.
        min_pixels: smaller images are scaled up to at least this area.
        max_pixels: larger images are scaled down to at most this area.
        max_patches: optional cap on the number of patches (rows of ``pixel_values``).
        max_aspect_ratio: more elongated images are an error.
        interpolation: Pillow filter for the resize.
        mean: per-channel means for ``uint8`` input (default CLIP's, as Qwen2-VL); None: rescale only.
        std: per-channel standard deviations (default CLIP's).
        rescale: factor applied to ``uint8`` input before mean/std.
        field: the image field (HWC, HW, or THWC for video).
        out_patches: the patches' field.
        out_grid: the grid's field.
        keep_image: keep the image field (default: dropped, the patches hold the same pixels).
        missing: a record without ``field`` (absent or None): ``"error"`` (default) or ``"pass"``
            (it goes on with neither ``out_patches`` nor ``out_grid``, as a text-only sample of
            ``pack_sequences(image_token_id=...)``, and without a None ``field`` unless ``keep_image``).
    """

    kind = "patchify"

    def __init__(
        self,
        patch_size: int = 14,
        *,
        temporal_patch_size: int = 2,
        merge_size: int = 2,
        min_pixels: int = QWEN2_VL_MIN_PIXELS,
        max_pixels: int = QWEN2_VL_MAX_PIXELS,
        max_patches: int | None = None,
        max_aspect_ratio: float = 200.0,
        interpolation: str = "bicubic",
        mean: Sequence[float] | None = CLIP_MEAN,
        std: Sequence[float] | None = CLIP_STD,
        rescale: float = 1 / 255,
        field: str = "image",
        out_patches: str = "pixel_values",
        out_grid: str = "image_grid_thw",
        keep_image: bool = False,
        missing: Missing = "error",
        parallelism: int = 1,
        runner: str | None = None,
        name: str | None = None,
        timeout_s: float | None = None,
    ) -> None:
        what = "patchify"
        ps = _positive_int(patch_size, what, "patch_size")
        tps = _positive_int(temporal_patch_size, what, "temporal_patch_size")
        m = _positive_int(merge_size, what, "merge_size")
        lo = _positive_int(min_pixels, what, "min_pixels")
        hi = _positive_int(max_pixels, what, "max_pixels")
        factor = ps * m
        if hi < factor * factor:
            raise ConfigError(f"{what}: max_pixels={hi} is less than one {factor}x{factor} merge window")
        if lo > hi:
            raise ConfigError(f"{what}: min_pixels={lo} exceeds max_pixels={hi}")
        if max_patches is not None and _positive_int(max_patches, what, "max_patches") < m * m:
            raise ConfigError(f"{what}: max_patches={max_patches} is less than one merge window ({m * m} patches)")
        if isinstance(max_aspect_ratio, bool) or not isinstance(max_aspect_ratio, (int, float)) or not max_aspect_ratio >= 1:
            raise ConfigError(f"{what}: max_aspect_ratio must be a number >= 1, got {max_aspect_ratio!r}")
        if (mean is None) != (std is None):
            raise ConfigError(f"{what}: give both mean and std, or neither")
        if isinstance(rescale, bool) or not isinstance(rescale, (int, float)) or not math.isfinite(rescale):
            raise ConfigError(f"{what}: rescale must be a finite number, got {rescale!r}")
        fn = PatchifyFn(
            field=check_field(field, what),
            patch_size=ps,
            temporal_patch_size=tps,
            merge_size=m,
            min_pixels=lo,
            max_pixels=hi,
            max_patches=max_patches,
            max_aspect_ratio=float(max_aspect_ratio),
            interpolation=check_interpolation(interpolation, what),
            mean=None if mean is None else check_stats(mean, what, "mean"),
            std=None if std is None else check_stats(std, what, "std", positive=True),
            rescale=float(rescale),
            out_patches=check_field(out_patches, what),
            out_grid=check_field(out_grid, what),
            keep_image=bool(keep_image),
            missing=check_missing(missing, what),
        )
        super().__init__(fn, parallelism=parallelism, runner=runner, name=name, timeout_s=timeout_s)
