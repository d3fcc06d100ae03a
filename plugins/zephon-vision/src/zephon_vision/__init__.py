"""zephon-vision: image decoding, seeded augmentation, normalization and patchify for Zephon pipelines.

Importing this package is cheap; Pillow is imported with the first operator.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "DecodeImage": "zephon_vision.decode",
    "ImageDecodeError": "zephon_vision.decode",
    "decode_bytes": "zephon_vision.decode",
    "Resize": "zephon_vision.geometry",
    "CenterCrop": "zephon_vision.geometry",
    "RandomResizedCrop": "zephon_vision.geometry",
    "HorizontalFlip": "zephon_vision.geometry",
    "Normalize": "zephon_vision.normalize",
    "Patchify": "zephon_vision.patchify",
    "smart_resize": "zephon_vision.patchify",
    "patchify_frames": "zephon_vision.patchify",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    mod = _EXPORTS.get(name)
    if mod is None:
        raise AttributeError(f"module 'zephon_vision' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(mod), name)


if TYPE_CHECKING:
    from zephon_vision.decode import DecodeImage, ImageDecodeError, decode_bytes
    from zephon_vision.geometry import CenterCrop, HorizontalFlip, RandomResizedCrop, Resize
    from zephon_vision.normalize import Normalize
    from zephon_vision.patchify import Patchify, patchify_frames, smart_resize
