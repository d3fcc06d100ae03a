"""``normalize``: pixels → float32 ``(x * rescale - mean) / std`` per channel, HWC or CHW.

Computed as ``x * a + b`` with ``a = rescale / std`` and ``b = -mean / std`` rounded to float32 once
per call: two IEEE float32 operations per value, so the result is the same bits on every machine
(numpy never fuses them), whereas a chain of four operations would only add rounding steps.
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
    check_missing,
    get_image,
    has_image,
    without,
)

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
"""OpenAI CLIP's statistics, which Qwen2-VL's image processor uses too."""


def affine(mean: Sequence[float], std: Sequence[float], rescale: float, channels: int, what: str) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel float32 ``(a, b)`` with ``x * a + b == (x * rescale - mean) / std``; one value broadcasts."""
    if len(mean) not in (1, channels) or len(std) not in (1, channels):
        raise ValueError(f"{what}: mean and std have {len(mean)} and {len(std)} values for an image with {channels} channels")
    m = np.broadcast_to(np.asarray(mean, dtype=np.float64), (channels,))
    s = np.broadcast_to(np.asarray(std, dtype=np.float64), (channels,))
    return (rescale / s).astype(np.float32), (-m / s).astype(np.float32)


def normalize_array(image: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``image`` (..., C) as float32 ``image * a + b`` (in place on a fresh float32 copy)."""
    out = image.astype(np.float32)
    out *= a
    out += b
    return out


def check_stats(values: Any, what: str, name: str, positive: bool = False) -> tuple[float, ...]:
    ok = isinstance(values, (tuple, list)) and len(values) >= 1
    ok = ok and all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in values)
    if ok and positive:
        ok = all(v > 0 for v in values)
    if not ok:
        raise ConfigError(f"{what}: {name} must be a non-empty sequence of finite numbers{' > 0' if positive else ''}, got {values!r}")
    return tuple(float(v) for v in values)


@dataclass(frozen=True)
class NormalizeFn(ImageFn):
    field: str
    out: str
    mean: tuple[float, ...]
    std: tuple[float, ...]
    rescale: float
    chw: bool
    missing: Missing = "error"

    def __call__(self, payload: Payload) -> Payload:
        if self.missing == "pass" and not has_image(payload, self.field):
            return payload if self.out == self.field else without(payload, (self.field,))
        image = get_image(payload, self.field, "normalize")
        hwc = image if image.ndim == 3 else image[:, :, None]
        a, b = affine(self.mean, self.std, self.rescale, hwc.shape[2], "normalize")
        out = normalize_array(hwc, a, b)
        if self.chw:
            out = np.ascontiguousarray(out.transpose(2, 0, 1))
        result = {k: v for k, v in payload.items() if k != self.field}
        result[self.out] = out
        return result


class Normalize(ImageOperator):
    """Per-channel normalization to float32 (module docstring).

    Args:
        mean: per-channel means on the rescaled scale (default ImageNet's), or one value for all.
        std: per-channel standard deviations (default ImageNet's), or one value.
        rescale: applied before ``mean``/``std`` (default ``1/255``: uint8 pixels to [0, 1]).
        chw: emit CHW (channels first, what a convolution expects) instead of HWC.
        field: the image field.
        out: where the result goes (default: ``field``, replacing the image).
        missing: a record without ``field`` (absent or None): ``"error"`` (default) or ``"pass"``
            (it goes on unchanged, except that a None ``field`` is dropped when ``out`` is another
            field, as the image would be).
    """

    kind = "normalize"

    def __init__(
        self,
        mean: Sequence[float] = IMAGENET_MEAN,
        std: Sequence[float] = IMAGENET_STD,
        *,
        rescale: float = 1 / 255,
        chw: bool = False,
        field: str = "image",
        out: str | None = None,
        missing: Missing = "error",
        parallelism: int = 1,
        runner: str | None = None,
        name: str | None = None,
        timeout_s: float | None = None,
    ) -> None:
        what = "normalize"
        if isinstance(rescale, bool) or not isinstance(rescale, (int, float)) or not math.isfinite(rescale):
            raise ConfigError(f"{what}: rescale must be a finite number, got {rescale!r}")
        mean_t, std_t = check_stats(mean, what, "mean"), check_stats(std, what, "std", positive=True)
        if len(mean_t) > 1 and len(std_t) > 1 and len(mean_t) != len(std_t):
            raise ConfigError(f"{what}: mean has {len(mean_t)} values and std {len(std_t)}")
        fn = NormalizeFn(
            check_field(field, what),
            check_field(out or field, what),
            mean_t,
            std_t,
            float(rescale),
            bool(chw),
            missing=check_missing(missing, what),
        )
        super().__init__(fn, parallelism=parallelism, runner=runner, name=name, timeout_s=timeout_s)
