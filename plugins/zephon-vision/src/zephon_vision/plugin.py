"""Entry point of the ``zephon`` plugin group: registers the vision operators and the image field validator.

Factories are lazy ``"module:attr"`` strings so that ``import zephon_core`` (and listing plugins)
never imports Pillow.
"""

from __future__ import annotations

from typing import Any

from zephon_core.hookspecs import hookimpl

ZEPHON_CONTRACT = (1, 0)
"""The zephon plugin contract this plugin is built for (the kernel refuses an incompatible one)."""


OPERATORS = {
    "decode_image": ("zephon_vision.decode:DecodeImage", "JPEG/PNG/WebP bytes -> HWC uint8 (EXIF orientation, mode, skip bad images)"),
    "resize": ("zephon_vision.geometry:Resize", "resize an HWC image (shorter side or exact size; Pillow filters)"),
    "center_crop": ("zephon_vision.geometry:CenterCrop", "central crop (padded when the image is smaller)"),
    "random_resized_crop": (
        "zephon_vision.geometry:RandomResizedCrop",
        "random area/aspect crop resized to a fixed size, per-sample seeded",
    ),
    "horizontal_flip": ("zephon_vision.geometry:HorizontalFlip", "left-right flip with probability p, per-sample seeded"),
    "normalize": ("zephon_vision.normalize:Normalize", "(x * rescale - mean) / std -> float32, HWC or CHW"),
    "patchify": (
        "zephon_vision.patchify:Patchify",
        "image -> flattened patches + (t, h, w) grid for variable-resolution encoders (Qwen2-VL/NaViT)",
    ),
}


@hookimpl
def zephon_register_operators(register: Any) -> None:
    for name, (factory, description) in OPERATORS.items():
        register(name=name, factory=factory, description=description)


@hookimpl
def zephon_register_validators(register: Any) -> None:
    register(
        name="image",
        factory="zephon_vision.validate:check_image",
        description="zephon index --validate: bytes that sniff as an image, or a jpg/png/... field, must decode with Pillow",
    )
