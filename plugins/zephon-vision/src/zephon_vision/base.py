"""What every vision operator shares: a per-record function run by the kernel's ``map_transform``.

Each operator is a :class:`~zephon_core.defaults.operators.mapping.MapTransform` whose function is a small frozen
dataclass (picklable, so it runs on every runner; its fields are the operator's configuration).
Building on ``map_transform`` rather than on a new accumulator keeps the determinism argument
where it already holds: the accumulator only passes records through, the worker is a pure function
of the record, and the operators that draw random numbers get them from the kernel's per-sample
generator (a function that declares ``rng``), seeded from (``seed``, operator name, record key).

Images are numpy arrays in HWC layout (height, width, channels), ``uint8`` after decoding; a 2-D
array is a one-channel image. Resampling goes through Pillow, whose integer resampling code gives
the same bytes on every run of the same Pillow build.

Every operator takes ``missing``: what to do with a record that has no image (its field absent, or
None as a nullable column stores it). ``"error"``, the default, is an error naming the sample: in a
pure image dataset that is a schema mistake. ``"pass"`` lets the record through without touching it
(an operator that consumes its input field drops a None one, so the record leaves with the fields
an image record would have less the outputs): the text-only samples of a text + image mixture, which
``pack_sequences(image_token_id=...)`` packs into the same rows as the image samples. A passed record
draws no random numbers; the generator is per record anyway, so no other record's draws change.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np
from PIL import Image

from zephon_core.plugin_api import ConfigError, FunctionOperator, RecordFn

Payload = dict[str, Any]

INTERPOLATIONS: dict[str, Image.Resampling] = {
    "nearest": Image.Resampling.NEAREST,
    "box": Image.Resampling.BOX,
    "bilinear": Image.Resampling.BILINEAR,
    "hamming": Image.Resampling.HAMMING,
    "bicubic": Image.Resampling.BICUBIC,
    "lanczos": Image.Resampling.LANCZOS,
}
"""Pillow's resampling filters by name (Pillow filters always antialias when they shrink)."""

_MODES = {1: "L", 3: "RGB", 4: "RGBA"}


def check_interpolation(name: str, what: str) -> str:
    if name not in INTERPOLATIONS:
        raise ConfigError(f"{what}: interpolation must be one of {sorted(INTERPOLATIONS)}, got {name!r}")
    return name


def check_size(size: Any, what: str, *, allow_int: bool = True) -> int | tuple[int, int]:
    """A size option: an int (meaning depends on the operator) or ``(height, width)``, all positive."""
    if allow_int and isinstance(size, int) and not isinstance(size, bool):
        if size < 1:
            raise ConfigError(f"{what}: size must be >= 1, got {size}")
        return size
    if (
        isinstance(size, (tuple, list))
        and len(size) == 2
        and all(isinstance(s, int) and not isinstance(s, bool) and s >= 1 for s in size)
    ):
        return (int(size[0]), int(size[1]))
    kinds = "an int or (height, width)" if allow_int else "(height, width)"
    raise ConfigError(f"{what}: size must be {kinds} of positive ints, got {size!r}")


def check_field(field: Any, what: str) -> str:
    if not isinstance(field, str) or not field:
        raise ConfigError(f"{what}: field must be a non-empty string, got {field!r}")
    return field


Missing = Literal["error", "pass"]
"""What a vision operator does with a record that has no image (the ``missing`` option)."""

MISSING_HINT = "pass missing='pass' to let records without an image through, e.g. the text-only samples of a mixture"


def check_missing(missing: Any, what: str) -> Missing:
    """The ``missing`` option, checked: ``"error"`` (the default) or ``"pass"``."""
    if missing == "error":
        return "error"
    if missing == "pass":
        return "pass"
    raise ConfigError(f"{what}: missing must be 'error' or 'pass', got {missing!r}")


def has_image(payload: Payload, field: str) -> bool:
    """Whether the record holds something in ``field``: absent and ``None`` (a null in a nullable
    column, as a Parquet table mixing text-only and image rows has) both mean "no image"."""
    return payload.get(field) is not None


def without(payload: Payload, fields: Sequence[str]) -> Payload:
    """``payload`` less ``fields``: what a record without an image leaves an operator as, when the
    operator consumes its input field, so it has the fields an image record would have less the outputs."""
    return payload if not any(f in payload for f in fields) else {k: v for k, v in payload.items() if k not in fields}


def get_image(payload: Payload, field: str, what: str) -> np.ndarray:
    """``payload[field]`` as an HW or HWC array, or an error that says what the record holds instead."""
    value = payload.get(field)
    if value is None:
        held = "no field" if field not in payload else "None in field"
        raise KeyError(f"{what}: the record has {held} {field!r} (fields: {sorted(payload)}); {MISSING_HINT}")
    if not isinstance(value, np.ndarray) or value.ndim not in (2, 3):
        shape = getattr(value, "shape", None)
        raise TypeError(
            f"{what}: field {field!r} must be an HWC (or HW) image array; got {type(value).__name__}"
            + (f" of shape {shape}" if shape is not None else "")
            + " (decode encoded images with decode_image first)"
        )
    return value


def resize_array(image: np.ndarray, size: tuple[int, int], interpolation: str, box: Sequence[int] | None = None) -> np.ndarray:
    """Resample ``image`` (HW or HWC) to ``size`` = (height, width) with Pillow, optionally from a crop box.

    ``box`` is ``(left, top, right, bottom)`` in source pixels: crop and resize in one resampling
    pass. ``uint8`` images with 1, 3 or 4 channels are resampled as one Pillow image; anything else
    (other channel counts, other dtypes) channel by channel in Pillow's 32-bit float mode. Float
    input comes back as float32; integer input is rounded (half to even) and clipped back to its dtype.
    """
    height, width = size
    resample = INTERPOLATIONS[interpolation]
    pil_box = None if box is None else tuple(float(b) for b in box)
    channels = 1 if image.ndim == 2 else image.shape[2]
    if image.dtype == np.uint8 and channels in _MODES:
        flat = image if image.ndim == 2 else (image[:, :, 0] if channels == 1 else image)
        out = pil_to_array(Image.fromarray(np.ascontiguousarray(flat), _MODES[channels]).resize((width, height), resample, pil_box))
        return out.reshape(height, width, channels) if image.ndim == 3 else out
    planes = image[:, :, None] if image.ndim == 2 else image
    resized = [
        np.asarray(
            Image.fromarray(np.ascontiguousarray(planes[:, :, c], dtype=np.float32), "F").resize((width, height), resample, pil_box)
        )
        for c in range(planes.shape[2])
    ]
    out = np.stack(resized, axis=2)
    if image.dtype.kind in "ui":
        info = np.iinfo(image.dtype)
        out = np.clip(np.rint(out), info.min, info.max).astype(image.dtype)
    return out[:, :, 0] if image.ndim == 2 else out


def pil_to_array(image: Image.Image) -> np.ndarray:
    """A writable array of a Pillow image (``np.asarray`` would give a read-only view of its bytes,
    and a user function that writes into its input would then fail on threads but not on processes)."""
    return np.array(image)


@dataclass(frozen=True)
class ImageFn(RecordFn):
    """Base of the per-record functions: a frozen dataclass whose fields are the configuration.

    ``missing`` is left out of the configuration at its default (``"error"``), so a pipeline built
    before the option existed keeps its fingerprint and its checkpoints still resume.
    """

    omit_defaults: ClassVar[dict[str, Any]] = {"missing": "error"}


class ImageOperator(FunctionOperator):
    """A vision operator: ``map_transform`` over one :class:`ImageFn`, named after its kind.

    The configuration (and so the pipeline fingerprint) is the function's fields, plus ``seed`` for
    the operators that draw random numbers (the kernel's :class:`~zephon_core.plugin_api.FunctionOperator`).
    """
