"""The ``image`` field validator: what ``zephon index --validate`` decodes with zephon-vision installed.

A format reader checks that a record parses, not that the JPEG inside it decodes; without this, a
garbage image passes validation and ``decode_image`` fails on it hours into a run. The validator
claims a field when

* its bytes *sniff* as an image (JPEG, PNG, GIF, WebP, BMP or TIFF signature), whatever the field
  is called (a Parquet ``image`` column, a Hugging Face ``{"bytes": ..., "path": ...}`` struct), or
* the field is *named* like an image (``jpg``, ``png``, ``webp``, … — a WebDataset member's
  extension, also as the last part of ``seg.png``), whatever its bytes: random bytes under
  ``.jpg`` are a garbage image, not "not an image".

and decodes it with Pillow as ``decode_image`` does by default (the same formats, the same
``max_pixels`` limit). It stays cheap: a JPEG is decoded at 1/8 scale (libjpeg's DCT scaling still
entropy-decodes every block, so truncation and broken scans are found, at a fraction of the cost);
other formats are decoded in full, which for PNG is what checks its compressed data at all.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np
from PIL import Image

from zephon_vision.decode import DEFAULT_FORMATS, DEFAULT_MAX_PIXELS, ImageDecodeError

IMAGE_FIELDS = frozenset({"jpg", "jpeg", "png", "webp", "gif", "bmp", "tif", "tiff"})
"""Field names (WebDataset member extensions) whose bytes must be an image."""

_BMP_HEADERS = frozenset({12, 40, 52, 56, 64, 108, 124})
"""DIB header sizes that follow a BMP's ``BM``: two letters alone are too weak a signature."""


def sniff(head: bytes) -> str | None:
    """The image format whose signature ``head`` (a value's first 16 bytes or more) starts with, or None."""
    if head.startswith(b"\xff\xd8\xff"):
        return "JPEG"
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "PNG"
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return "GIF"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "WEBP"
    if head[:4] in (b"II*\x00", b"MM\x00*"):
        return "TIFF"
    if head[:2] == b"BM" and len(head) >= 18 and int.from_bytes(head[14:18], "little") in _BMP_HEADERS:
        return "BMP"
    return None


def _buffer(value: Any) -> bytes | memoryview | None:
    """The bytes of an encoded-image value (what ``decode_image`` accepts), or None for any other value."""
    if isinstance(value, (bytes, memoryview)):
        return value
    if isinstance(value, bytearray):
        return memoryview(value)
    if isinstance(value, np.ndarray) and value.dtype == np.uint8 and value.ndim == 1:
        return np.ascontiguousarray(value).data
    return None


def check_image(field: str, value: Any) -> bool:
    """Decode ``value`` if it is an encoded image (module docstring); False when it is not one.

    Raises:
        ImageDecodeError: the value is an image (by its bytes or its field's name) that Pillow
            cannot decode, with the reason (truncated, unknown format, too many pixels).
    """
    data = _buffer(value)
    if data is None:
        return False
    head = bytes(data[:32])
    kind = sniff(head)
    if kind is None:
        if field.rsplit(".", 1)[-1].lower() not in IMAGE_FIELDS:
            return False
        raise ImageDecodeError(
            f"{len(data)} bytes starting {head[:8]!r} are in no image format Pillow reads "
            f"(formats tried: {', '.join(DEFAULT_FORMATS)})"
        )
    try:
        with Image.open(io.BytesIO(data), formats=list(DEFAULT_FORMATS)) as im:
            if im.width * im.height > DEFAULT_MAX_PIXELS:
                raise ImageDecodeError(
                    f"{im.width}x{im.height} pixels exceeds decode_image's default max_pixels={DEFAULT_MAX_PIXELS}"
                )
            if im.format == "JPEG":
                im.draft(im.mode, (max(1, im.width // 8), max(1, im.height // 8)))
            im.load()
    except ImageDecodeError:
        raise
    except Exception as exc:  # Pillow raises OSError, SyntaxError, ValueError, DecompressionBombError…
        raise ImageDecodeError(f"{kind}: {type(exc).__name__}: {exc}") from exc
    return True
