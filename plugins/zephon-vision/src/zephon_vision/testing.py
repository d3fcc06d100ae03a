"""Test images made from real photographs: scikit-image's bundled sample data, cropped, resized and
encoded with Pillow (install ``zephon-vision[test]``).

Real photographs rather than noise or gradients, because codecs, resamplers and orientation bugs
behave differently on natural images (noise does not compress; a gradient hides a transposition).
Everything here is deterministic: crops come from a local generator with a fixed seed.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Sequence
from typing import Any

import numpy as np
from PIL import Image

PHOTOS = ("astronaut", "chelsea", "coffee", "rocket", "hubble_deep_field", "immunohistochemistry", "camera", "moon")
"""scikit-image sample images used (``camera`` and ``moon`` are grayscale)."""
FORMATS = ("JPEG", "PNG", "WEBP")


@functools.lru_cache(maxsize=1)
def photographs() -> tuple[tuple[str, np.ndarray], ...]:
    """``(name, array)`` of each photograph in :data:`PHOTOS` (HWC RGB, or HW for grayscale)."""
    import skimage.data

    return tuple((name, getattr(skimage.data, name)()) for name in PHOTOS)


def image_arrays(n: int, *, min_side: int = 24, max_side: int = 96, seed: int = 0, rgb: bool = True) -> list[np.ndarray]:
    """``n`` images of mixed sizes and aspect ratios: random crops of the photographs, resized.

    With ``rgb`` grayscale photographs are replicated to three channels, so every image is HWC RGB.
    """
    rng = np.random.default_rng(seed)  # a local generator: test data, not pipeline randomness
    photos = photographs()
    out = []
    for i in range(n):
        _, photo = photos[i % len(photos)]
        h, w = photo.shape[:2]
        ch, cw = int(rng.integers(h // 3, h + 1)), int(rng.integers(w // 3, w + 1))
        top, left = int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1))
        crop = photo[top : top + ch, left : left + cw]
        th, tw = int(rng.integers(min_side, max_side + 1)), int(rng.integers(min_side, max_side + 1))
        im = Image.fromarray(np.ascontiguousarray(crop)).resize((tw, th), Image.Resampling.BILINEAR)
        if rgb:
            im = im.convert("RGB")
        out.append(np.array(im))
    return out


def encode(
    image: np.ndarray | Image.Image,
    fmt: str = "JPEG",
    *,
    quality: int = 85,
    orientation: int | None = None,
    mode: str | None = None,
) -> bytes:
    """Encode an array (or Pillow image) as ``fmt``, optionally converted to ``mode`` first and with
    an EXIF orientation tag (the pixels are stored as given: a viewer would rotate them)."""
    im = image if isinstance(image, Image.Image) else Image.fromarray(np.ascontiguousarray(image))
    if mode is not None:
        im = im.convert(mode)
    kwargs: dict[str, Any] = {}
    if fmt in ("JPEG", "WEBP"):
        kwargs["quality"] = quality
    if orientation is not None:
        exif = Image.Exif()
        exif[0x0112] = orientation
        kwargs["exif"] = exif.tobytes()
    buf = io.BytesIO()
    im.save(buf, fmt, **kwargs)
    return buf.getvalue()


def encoded_records(
    n: int,
    *,
    formats: Sequence[str] = FORMATS,
    min_side: int = 24,
    max_side: int = 96,
    seed: int = 0,
    field: str = "image",
    variety: bool = True,
) -> list[dict[str, Any]]:
    """``n`` records ``{field: bytes, "n": i}`` cycling through ``formats``.

    With ``variety`` some records also carry an EXIF orientation (2-8), are stored grayscale,
    with an alpha channel, or palette-based, so a decoder meets what real corpora hold.
    """
    out = []
    for i, image in enumerate(image_arrays(n, min_side=min_side, max_side=max_side, seed=seed)):
        fmt = formats[i % len(formats)]
        orientation = mode = None
        if variety:
            orientation = 2 + (i // 3) % 7 if fmt != "PNG" and i % 4 == 1 else None
            if i % 5 == 2:
                mode = "L"
            elif i % 7 == 3 and fmt != "JPEG":
                mode = "RGBA"
            elif i % 11 == 4 and fmt == "PNG":
                mode = "P"
        if mode == "RGBA":  # real transparency: alpha fades from opaque (left) to transparent (right)
            alpha = np.broadcast_to(np.linspace(255, 0, image.shape[1]).astype(np.uint8), image.shape[:2])
            image, mode = np.dstack([image, alpha]), None
        out.append({field: encode(image, fmt, orientation=orientation, mode=mode), "n": i})
    return out


def array_records(n: int, *, min_side: int = 24, max_side: int = 96, seed: int = 0, field: str = "image") -> list[dict[str, Any]]:
    """``n`` records ``{field: HWC uint8 array, "n": i}`` (already decoded images)."""
    return [{field: image, "n": i} for i, image in enumerate(image_arrays(n, min_side=min_side, max_side=max_side, seed=seed))]
