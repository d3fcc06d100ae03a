"""Geometric operators: ``resize``, ``center_crop``, and the seeded ``random_resized_crop`` and
``horizontal_flip``.

The random ones declare ``rng`` and so get the kernel's per-sample generator: a record's crop box
or flip is a pure function of (``seed``, operator name, record key) and never of the runner,
parallelism, lane, rank or resume point. Two steps of the same kind in one pipeline are numbered
(``horizontal_flip``, ``horizontal_flip_2``) and so draw independently.

Integer arithmetic is used wherever a size or offset is derived (``long * size // short``,
``(h - crop) // 2``), so no float rounding can move a pixel between machines; only the random
crop's area and aspect ratio go through ``math.sqrt``/``math.exp``, as in torchvision.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from zephon_core.plugin_api import ConfigError
from zephon_vision.base import (
    ImageFn,
    ImageOperator,
    Missing,
    Payload,
    check_field,
    check_interpolation,
    check_missing,
    check_size,
    get_image,
    has_image,
    resize_array,
)


def _pair(size: int | tuple[int, int]) -> tuple[int, int]:
    return (size, size) if isinstance(size, int) else size


def resized_shape(height: int, width: int, size: int | tuple[int, int], max_size: int | None = None) -> tuple[int, int]:
    """The (height, width) ``resize`` produces: ``(h, w)`` as given, or for an int the shorter side
    set to ``size`` and the longer scaled in proportion (floored), then capped at ``max_size``."""
    if not isinstance(size, int):
        return size
    short, long = (height, width) if height <= width else (width, height)
    new_short, new_long = size, max(1, long * size // short)
    if max_size is not None and new_long > max_size:
        new_short, new_long = max(1, new_short * max_size // new_long), max_size
    return (new_short, new_long) if height <= width else (new_long, new_short)


@dataclass(frozen=True)
class ResizeFn(ImageFn):
    field: str
    size: int | tuple[int, int]
    interpolation: str
    max_size: int | None
    missing: Missing = "error"

    def __call__(self, payload: Payload) -> Payload:
        if self.missing == "pass" and not has_image(payload, self.field):
            return payload
        image = get_image(payload, self.field, "resize")
        shape = resized_shape(image.shape[0], image.shape[1], self.size, self.max_size)
        if shape == image.shape[:2]:
            return payload
        return {**payload, self.field: resize_array(image, shape, self.interpolation)}


class Resize(ImageOperator):
    """Resize an HWC image with Pillow.

    Args:
        size: ``(height, width)``, or an int: the shorter side becomes ``size``, the longer one
            ``long * size // short`` (aspect ratio kept, floored).
        interpolation: ``"nearest"``, ``"box"``, ``"bilinear"``, ``"hamming"``, ``"bicubic"`` or
            ``"lanczos"`` (Pillow filters, antialiased when shrinking).
        max_size: with an int ``size``, the longer side's cap (the shorter shrinks in proportion).
        field: the image field (replaced by the resized image).
        missing: a record without ``field`` (absent or None): ``"error"`` (default) or ``"pass"``
            (it goes on unchanged: the text-only samples of a text + image mixture).
    """

    kind = "resize"

    def __init__(
        self,
        size: int | Sequence[int],
        *,
        interpolation: str = "bilinear",
        max_size: int | None = None,
        field: str = "image",
        missing: Missing = "error",
        parallelism: int = 1,
        runner: str | None = None,
        name: str | None = None,
        timeout_s: float | None = None,
    ) -> None:
        checked = check_size(size, "resize")
        if max_size is not None and (not isinstance(max_size, int) or max_size < 1 or not isinstance(checked, int)):
            raise ConfigError(f"resize: max_size must be a positive int and needs an int size, got {max_size!r}")
        fn = ResizeFn(
            check_field(field, "resize"),
            checked,
            check_interpolation(interpolation, "resize"),
            max_size,
            missing=check_missing(missing, "resize"),
        )
        super().__init__(fn, parallelism=parallelism, runner=runner, name=name, timeout_s=timeout_s)


def center_crop_array(image: np.ndarray, size: tuple[int, int], fill: int | float = 0) -> np.ndarray:
    """The central ``size`` = (height, width) window; a smaller image is first padded with ``fill``
    evenly (the odd pixel on the bottom/right), so the output always has the requested size."""
    ch, cw = size
    h, w = image.shape[:2]
    if h < ch or w < cw:
        ph, pw = max(0, ch - h), max(0, cw - w)
        pad = [(ph // 2, ph - ph // 2), (pw // 2, pw - pw // 2)] + [(0, 0)] * (image.ndim - 2)
        image = np.pad(image, pad, constant_values=fill)
        h, w = image.shape[:2]
    top, left = (h - ch) // 2, (w - cw) // 2
    return np.ascontiguousarray(image[top : top + ch, left : left + cw])


@dataclass(frozen=True)
class CenterCropFn(ImageFn):
    field: str
    size: tuple[int, int]
    fill: int
    missing: Missing = "error"

    def __call__(self, payload: Payload) -> Payload:
        if self.missing == "pass" and not has_image(payload, self.field):
            return payload
        image = get_image(payload, self.field, "center_crop")
        return {**payload, self.field: center_crop_array(image, self.size, self.fill)}


class CenterCrop(ImageOperator):
    """Crop the central ``size`` window (int: a square), padding smaller images with ``fill``.

    The window starts at ``((h - crop_h) // 2, (w - crop_w) // 2)``. With ``missing="pass"`` a
    record without ``field`` (absent or None) goes on unchanged instead of being an error.
    """

    kind = "center_crop"

    def __init__(
        self,
        size: int | Sequence[int],
        *,
        fill: int = 0,
        field: str = "image",
        missing: Missing = "error",
        parallelism: int = 1,
        runner: str | None = None,
        name: str | None = None,
        timeout_s: float | None = None,
    ) -> None:
        if not isinstance(fill, int) or isinstance(fill, bool):
            raise ConfigError(f"center_crop: fill must be an int, got {fill!r}")
        fn = CenterCropFn(
            check_field(field, "center_crop"),
            _pair(check_size(size, "center_crop")),
            fill,
            missing=check_missing(missing, "center_crop"),
        )
        super().__init__(fn, parallelism=parallelism, runner=runner, name=name, timeout_s=timeout_s)


def random_crop_box(
    height: int, width: int, scale: tuple[float, float], ratio: tuple[float, float], rng: np.random.Generator
) -> tuple[int, int, int, int]:
    """``(top, left, crop_height, crop_width)`` by torchvision's ``RandomResizedCrop`` rule.

    Up to ten tries of an area fraction uniform in ``scale`` and a log-uniform aspect ratio in
    ``ratio``; the first box that fits is placed uniformly. Otherwise the largest central box whose
    aspect ratio is clamped to ``ratio``.
    """
    area = height * width
    log_lo, log_hi = math.log(ratio[0]), math.log(ratio[1])
    for _ in range(10):
        target = area * float(rng.uniform(scale[0], scale[1]))
        aspect = math.exp(float(rng.uniform(log_lo, log_hi)))
        cw = round(math.sqrt(target * aspect))
        ch = round(math.sqrt(target / aspect))
        if 0 < cw <= width and 0 < ch <= height:
            top = int(rng.integers(0, height - ch + 1))
            left = int(rng.integers(0, width - cw + 1))
            return top, left, ch, cw
    in_ratio = width / height
    if in_ratio < ratio[0]:
        cw, ch = width, max(1, min(height, round(width / ratio[0])))
    elif in_ratio > ratio[1]:
        ch, cw = height, max(1, min(width, round(height * ratio[1])))
    else:
        ch, cw = height, width
    return (height - ch) // 2, (width - cw) // 2, ch, cw


@dataclass(frozen=True)
class RandomResizedCropFn(ImageFn):
    field: str
    size: tuple[int, int]
    scale: tuple[float, float]
    ratio: tuple[float, float]
    interpolation: str
    missing: Missing = "error"

    def __call__(self, payload: Payload, rng: np.random.Generator) -> Payload:
        if self.missing == "pass" and not has_image(payload, self.field):
            return payload  # draws nothing: the generator is the record's own, no other record shifts
        image = get_image(payload, self.field, "random_resized_crop")
        top, left, ch, cw = random_crop_box(image.shape[0], image.shape[1], self.scale, self.ratio, rng)
        out = resize_array(image, self.size, self.interpolation, box=(left, top, left + cw, top + ch))
        return {**payload, self.field: out}


def _check_range(value: Any, what: str, name: str, positive: bool) -> tuple[float, float]:
    ok = (
        isinstance(value, (tuple, list))
        and len(value) == 2
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value)
        and value[0] <= value[1]
        and (value[0] > 0 if positive else value[0] >= 0)
    )
    if not ok:
        raise ConfigError(f"{what}: {name} must be (low, high) with {'0 <' if positive else '0 <='} low <= high, got {value!r}")
    return (float(value[0]), float(value[1]))


class RandomResizedCrop(ImageOperator):
    """A random crop of random area and aspect ratio, resized to ``size`` (torchvision's rule).

    Args:
        size: output ``(height, width)``; an int is a square.
        scale: range of the crop's area as a fraction of the image's.
        ratio: range of the crop's aspect ratio (width / height), sampled log-uniformly.
        interpolation: Pillow filter for the resize (crop and resize are one resampling pass).
        seed: varies the draws; the generator is the kernel's per-sample one.
        field: the image field.
        missing: a record without ``field`` (absent or None): ``"error"`` (default) or ``"pass"``
            (it goes on unchanged).
    """

    kind = "random_resized_crop"

    def __init__(
        self,
        size: int | Sequence[int],
        *,
        scale: Sequence[float] = (0.08, 1.0),
        ratio: Sequence[float] = (3 / 4, 4 / 3),
        interpolation: str = "bilinear",
        seed: int = 0,
        field: str = "image",
        missing: Missing = "error",
        parallelism: int = 1,
        runner: str | None = None,
        name: str | None = None,
        timeout_s: float | None = None,
    ) -> None:
        what = "random_resized_crop"
        sc = _check_range(scale, what, "scale", positive=True)
        if sc[1] > 1:
            raise ConfigError(f"{what}: scale is a fraction of the image's area, at most 1, got {scale!r}")
        fn = RandomResizedCropFn(
            check_field(field, what),
            _pair(check_size(size, what)),
            sc,
            _check_range(ratio, what, "ratio", positive=True),
            check_interpolation(interpolation, what),
            missing=check_missing(missing, what),
        )
        super().__init__(fn, seed=seed, parallelism=parallelism, runner=runner, name=name, timeout_s=timeout_s)


@dataclass(frozen=True)
class HorizontalFlipFn(ImageFn):
    field: str
    p: float
    flag: str | None
    missing: Missing = "error"

    def __call__(self, payload: Payload, rng: np.random.Generator) -> Payload:
        if self.missing == "pass" and not has_image(payload, self.field):
            # no coin is drawn; the flag (if any) says nothing was flipped, so every record has it
            return payload if self.flag is None else {**payload, self.flag: False}
        image = get_image(payload, self.field, "horizontal_flip")
        flip = bool(rng.random() < self.p)
        out = {**payload, self.field: np.ascontiguousarray(image[:, ::-1]) if flip else image}
        if self.flag is not None:
            out[self.flag] = flip
        return out


class HorizontalFlip(ImageOperator):
    """Mirror the image left-right with probability ``p``, a per-sample seeded coin.

    Args:
        p: probability of a flip.
        seed: varies the coins.
        flag: if set, the field that records whether this record was flipped (e.g. to move boxes).
        field: the image field.
        missing: a record without ``field`` (absent or None): ``"error"`` (default) or ``"pass"``
            (it goes on unchanged; ``flag``, if set, is False).
    """

    kind = "horizontal_flip"

    def __init__(
        self,
        p: float = 0.5,
        *,
        seed: int = 0,
        flag: str | None = None,
        field: str = "image",
        missing: Missing = "error",
        parallelism: int = 1,
        runner: str | None = None,
        name: str | None = None,
        timeout_s: float | None = None,
    ) -> None:
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
            raise ConfigError(f"horizontal_flip: p must be a probability in [0, 1], got {p!r}")
        fn = HorizontalFlipFn(
            check_field(field, "horizontal_flip"),
            float(p),
            None if flag is None else check_field(flag, "horizontal_flip"),
            missing=check_missing(missing, "horizontal_flip"),
        )
        super().__init__(fn, seed=seed, parallelism=parallelism, runner=runner, name=name, timeout_s=timeout_s)
