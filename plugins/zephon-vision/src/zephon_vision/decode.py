"""``decode_image``: encoded image bytes (JPEG, PNG, WebP, …) → an HWC ``uint8`` array.

Two decoders give the same pixels:

* **Pillow** reads every format; it is the reference.
* **simplejpeg** (libjpeg-turbo, ``pip install zephon-vision[fast]``) decodes baseline and
  progressive JPEGs to RGB about twice as fast. It is used only where its output equals Pillow's —
  YCbCr, grayscale or RGB JPEGs decoded to ``mode="RGB"`` with the accurate IDCT and fancy
  upsampling that Pillow uses — and with ``strict=True``: any JPEG it finds damaged (even a
  recoverable warning) goes to Pillow, which either decodes it exactly as the Pillow backend would
  or raises. CMYK/YCCK JPEGs and every other mode go to Pillow.

The decoder in use is part of the operator's configuration (``backend``, resolved when the
operator is built), so a checkpoint names it and a resume with another decoder is refused by the
fingerprint check instead of silently mixing decoders.

EXIF orientation is applied after decoding (a transpose/rotation of the array, identical for both
decoders). A source with transparency converted to a mode without alpha is composited over
``background`` (white by default: a transparent pixel's colour is undefined, and black text on a
transparent background would otherwise become black on black).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from PIL import Image

from zephon_core.plugin_api import ConfigError
from zephon_vision.base import (
    MISSING_HINT,
    ImageFn,
    ImageOperator,
    Missing,
    Payload,
    check_field,
    check_missing,
    has_image,
    without,
)

Mode = Literal["RGB", "RGBA", "L"]
Backend = Literal["auto", "pillow", "simplejpeg"]
MODES = ("RGB", "RGBA", "L")
DEFAULT_FORMATS = ("JPEG", "PNG", "WEBP", "GIF", "BMP", "TIFF")
"""Formats Pillow may open by default ("JPEG" includes the MPO files many phone cameras write)."""
DEFAULT_MAX_PIXELS = 2 * 89_478_485
"""Pillow's decompression-bomb limit (width x height); larger images are a decode error."""
_ORIENTATION = 0x0112
Image.init()  # register every format plugin now: Image.open(formats=[...]) only knows registered ones
_ALPHA_MODES = {"RGBA", "LA", "PA", "RGBa", "La"}


class ImageDecodeError(ValueError):
    """An image that does not decode (corrupt, truncated, unknown format, too large)."""


def resolve_backend(backend: str) -> str:
    """``"auto"`` → ``"simplejpeg"`` when it is installed, else ``"pillow"``; checks explicit choices."""
    if backend not in ("auto", "pillow", "simplejpeg"):
        raise ConfigError(f"decode_image: backend must be 'auto', 'pillow' or 'simplejpeg', got {backend!r}")
    if backend == "pillow":
        return backend
    try:
        import simplejpeg  # noqa: F401
    except ImportError:
        if backend == "simplejpeg":
            raise ConfigError("decode_image: backend='simplejpeg' needs simplejpeg: pip install zephon-vision[fast]") from None
        return "pillow"
    return "simplejpeg"


# -- EXIF orientation -------------------------------------------------------------------------------
def orient(image: np.ndarray, orientation: int) -> np.ndarray:
    """Apply an EXIF orientation (1-8) to an HW/HWC array, as ``PIL.ImageOps.exif_transpose`` does."""
    if orientation == 2:
        out = image[:, ::-1]
    elif orientation == 3:
        out = image[::-1, ::-1]
    elif orientation == 4:
        out = image[::-1]
    elif orientation == 5:
        out = image.swapaxes(0, 1)
    elif orientation == 6:
        out = np.rot90(image, -1)
    elif orientation == 7:
        out = image[::-1, ::-1].swapaxes(0, 1)
    elif orientation == 8:
        out = np.rot90(image, 1)
    else:  # 1, absent or invalid: Pillow leaves the image as it is
        return image
    return np.ascontiguousarray(out)


def jpeg_orientation(data: bytes | memoryview) -> int:
    """The EXIF orientation of a JPEG from its first ``Exif`` APP1 segment (what Pillow reads), or 1.

    Parsed by hand so the simplejpeg path need not open the file with Pillow as well (a few µs
    instead of a few hundred).
    """
    buf = bytes(data[:65536 + 4]) if len(data) > 65540 else bytes(data)
    pos = 2
    n = len(buf)
    while pos + 4 <= n and buf[pos] == 0xFF:
        marker = buf[pos + 1]
        if marker == 0xFF:  # fill byte
            pos += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # no length
            pos += 2
            continue
        if marker in (0xDA, 0xD9):  # start of scan / end of image: no more headers
            return 1
        length = int.from_bytes(buf[pos + 2 : pos + 4], "big")
        start, end = pos + 4, pos + 2 + length
        if marker == 0xE1 and buf[start : start + 6] == b"Exif\0\0":
            return _tiff_orientation(buf[start + 6 : end])
        pos = end
    return 1


def _tiff_orientation(tiff: bytes) -> int:
    if len(tiff) < 8 or tiff[:2] not in (b"II", b"MM"):
        return 1
    order: Literal["little", "big"] = "little" if tiff[:2] == b"II" else "big"
    ifd = int.from_bytes(tiff[4:8], order)
    if ifd + 2 > len(tiff):
        return 1
    count = int.from_bytes(tiff[ifd : ifd + 2], order)
    for i in range(count):
        entry = ifd + 2 + 12 * i
        if entry + 12 > len(tiff):
            return 1
        if int.from_bytes(tiff[entry : entry + 2], order) == _ORIENTATION:
            kind = int.from_bytes(tiff[entry + 2 : entry + 4], order)
            width = 2 if kind in (3, 8) else 4 if kind in (4, 9) else 1
            value = int.from_bytes(tiff[entry + 8 : entry + 8 + width], order)
            return value if 1 <= value <= 8 else 1
    return 1


# -- decoding ---------------------------------------------------------------------------------------
def _as_buffer(value: Any) -> bytes | memoryview:
    if isinstance(value, (bytes, memoryview)):
        return value
    if isinstance(value, bytearray):
        return memoryview(value)
    if isinstance(value, np.ndarray) and value.dtype == np.uint8 and value.ndim == 1:
        return memoryview(np.ascontiguousarray(value))
    raise TypeError(f"expected encoded image bytes, got {type(value).__name__}")


def _to_mode(im: Image.Image, mode: str, background: tuple[int, int, int]) -> Image.Image:
    """Convert to ``mode``, scaling 16-bit sources to 8 bits and compositing alpha over ``background``."""
    if im.mode.startswith("I;16") or im.mode in ("I", "F"):
        # Pillow's own convert clips 16-bit values at 255; keep the high byte instead
        wide = np.asarray(im).astype(np.float64 if im.mode == "F" else np.int64)
        if im.mode == "F":
            eight = np.clip(wide, 0, 255).astype(np.uint8)
        else:
            eight = (np.clip(wide, 0, 65535) >> 8).astype(np.uint8)
        im = Image.fromarray(eight, "L")
    if im.mode == mode:
        return im
    has_alpha = im.mode in _ALPHA_MODES or (im.mode in ("P", "L", "RGB") and "transparency" in im.info)
    if has_alpha and mode != "RGBA":
        rgba = im.convert("RGBA")
        base = Image.new("RGBA", rgba.size, (*background, 255))
        return Image.alpha_composite(base, rgba).convert(mode)
    return im.convert(mode)


def _decode_pillow(
    data: bytes | memoryview, mode: str, background: tuple[int, int, int], exif: bool, formats: Sequence[str] | None, max_pixels: int | None
) -> np.ndarray:
    with Image.open(io.BytesIO(data), formats=list(formats) if formats else None) as im:
        if max_pixels is not None and im.width * im.height > max_pixels:
            raise ImageDecodeError(f"{im.width}x{im.height} pixels exceeds max_pixels={max_pixels}")
        im.load()
        orientation = im.getexif().get(_ORIENTATION, 1) if exif else 1
        array = np.array(_to_mode(im, mode, background))
    return orient(array, orientation if isinstance(orientation, int) else 1)


def _decode_simplejpeg(data: bytes | memoryview, exif: bool, max_pixels: int | None) -> np.ndarray | None:
    """RGB pixels of a JPEG Pillow would decode identically, or None to let Pillow decide."""
    import simplejpeg

    try:
        height, width, colorspace, _ = simplejpeg.decode_jpeg_header(data, strict=True)
    except ValueError:
        return None
    if colorspace not in ("YCbCr", "Gray", "RGB"):
        return None
    if max_pixels is not None and width * height > max_pixels:
        raise ImageDecodeError(f"{width}x{height} pixels exceeds max_pixels={max_pixels}")
    try:
        array = simplejpeg.decode_jpeg(data, colorspace="RGB", fastdct=False, fastupsample=False, strict=True)
    except ValueError:  # damaged (or only suspicious): Pillow is the reference for what that means
        return None
    return orient(array, jpeg_orientation(data)) if exif else array


def decode_bytes(
    data: Any,
    *,
    mode: str = "RGB",
    background: tuple[int, int, int] = (255, 255, 255),
    exif_transpose: bool = True,
    backend: str = "pillow",
    formats: Sequence[str] | None = DEFAULT_FORMATS,
    max_pixels: int | None = DEFAULT_MAX_PIXELS,
) -> np.ndarray:
    """Decode one encoded image to an HWC ``uint8`` array (3, 4 or 1 channels for RGB, RGBA, L).

    Raises :class:`ImageDecodeError` (with the decoder's reason) for anything that does not decode.
    ``backend`` must be resolved (``"pillow"`` or ``"simplejpeg"``), see :func:`resolve_backend`.
    """
    buf = _as_buffer(data)
    try:
        array = None
        if backend == "simplejpeg" and mode == "RGB" and bytes(buf[:3]) == b"\xff\xd8\xff":
            array = _decode_simplejpeg(buf, exif_transpose, max_pixels)
        if array is None:
            array = _decode_pillow(buf, mode, background, exif_transpose, formats, max_pixels)
    except ImageDecodeError:
        raise
    except Exception as exc:  # Pillow raises OSError, SyntaxError, ValueError, DecompressionBombError…
        raise ImageDecodeError(f"{type(exc).__name__}: {exc}") from exc
    return array[:, :, None] if array.ndim == 2 else array


@dataclass(frozen=True)
class DecodeFn(ImageFn):
    """The per-record function of :class:`DecodeImage` (its fields are the configuration)."""

    field: tuple[str, ...]
    out: str
    mode: str
    background: tuple[int, int, int]
    exif_transpose: bool
    on_error: str
    backend: str
    formats: tuple[str, ...] | None
    max_pixels: int | None
    keep_encoded: bool
    missing: Missing = "error"

    def __call__(self, payload: Payload) -> Payload | None:
        name = next((f for f in self.field if has_image(payload, f)), None)
        if name is None:
            if self.missing == "pass":  # a text-only sample: on it goes, less the (None) encoded fields
                return payload if self.keep_encoded else without(payload, self.field)
            raise KeyError(
                f"decode_image: the record has none of the fields {list(self.field)}, or only None in them "
                f"(fields: {sorted(payload)}); {MISSING_HINT}"
            )
        data = payload[name]
        try:
            data = _as_buffer(data)
        except TypeError as exc:  # a schema mistake (wrong field), never skipped: it would drop everything
            raise TypeError(f"decode_image: field {name!r}: {exc}") from None
        try:
            image = decode_bytes(
                data,
                mode=self.mode,
                background=self.background,
                exif_transpose=self.exif_transpose,
                backend=self.backend,
                formats=self.formats,
                max_pixels=self.max_pixels,
            )
        except ImageDecodeError as exc:
            if self.on_error == "skip":
                return None  # the kernel records a tombstone for the sample
            raise ImageDecodeError(
                f"decode_image: field {name!r} ({len(data)} bytes, starting {bytes(data[:8])!r}) is not a decodable image: {exc}"
                " (pass on_error='skip' to drop undecodable images)"
            ) from exc
        out = payload if self.keep_encoded else {k: v for k, v in payload.items() if k not in self.field}
        return {**out, self.out: image}


class DecodeImage(ImageOperator):
    """Decode encoded image bytes into an HWC ``uint8`` array (module docstring).

    Args:
        field: the field holding the bytes, or several candidates (the first present is decoded;
            e.g. ``("jpg", "png", "webp")`` for WebDataset samples).
        out: the field the array goes to (default: ``"image"``).
        mode: ``"RGB"`` (3 channels), ``"RGBA"`` (4) or ``"L"`` (1): what every image is converted to.
        background: RGB colour transparent pixels are composited over when ``mode`` has no alpha.
        exif_transpose: apply the EXIF orientation (what a photo viewer shows).
        on_error: ``"raise"`` (an error naming the sample) or ``"skip"`` (drop the record, kept
            as a tombstone in its lineage).
        backend: ``"auto"`` (simplejpeg for JPEGs when installed), ``"pillow"`` or ``"simplejpeg"``.
        formats: formats Pillow may open (None: every format Pillow knows).
        max_pixels: larger images are undecodable (decompression bombs); None disables the check.
        keep_encoded: keep the encoded bytes in the record (default: drop them, they are large).
        missing: a record with none of the fields (absent, or None: a null in a nullable column):
            ``"error"`` (default: a schema mistake should not pass silently) or ``"pass"`` (it goes on
            without ``out``, and without its None fields unless ``keep_encoded``: the text-only
            samples of a text + image mixture). Unlike ``on_error="skip"`` nothing is dropped.
    """

    kind = "decode_image"

    def __init__(
        self,
        field: str | Sequence[str] = "image",
        *,
        out: str = "image",
        mode: Mode = "RGB",
        background: Sequence[int] = (255, 255, 255),
        exif_transpose: bool = True,
        on_error: Literal["raise", "skip"] = "raise",
        backend: Backend = "auto",
        formats: Sequence[str] | None = DEFAULT_FORMATS,
        max_pixels: int | None = DEFAULT_MAX_PIXELS,
        keep_encoded: bool = False,
        missing: Missing = "error",
        parallelism: int = 1,
        runner: str | None = None,
        name: str | None = None,
        timeout_s: float | None = None,
    ) -> None:
        what = "decode_image"
        fields = (field,) if isinstance(field, str) else tuple(field)
        if not fields:
            raise ConfigError(f"{what}: field must name at least one field")
        for f in (*fields, out):
            check_field(f, what)
        if mode not in MODES:
            raise ConfigError(f"{what}: mode must be one of {list(MODES)}, got {mode!r}")
        bg = tuple(background)
        if len(bg) != 3 or not all(isinstance(c, int) and 0 <= c <= 255 for c in bg):
            raise ConfigError(f"{what}: background must be three ints in 0..255, got {background!r}")
        if on_error not in ("raise", "skip"):
            raise ConfigError(f"{what}: on_error must be 'raise' or 'skip', got {on_error!r}")
        if formats is not None:
            unknown = sorted({f.upper() for f in formats} - set(Image.OPEN))
            if unknown or not formats:
                raise ConfigError(f"decode_image: formats {unknown or '[]'} unknown to Pillow (it reads {sorted(Image.OPEN)})")
        if max_pixels is not None and (not isinstance(max_pixels, int) or max_pixels < 1):
            raise ConfigError(f"{what}: max_pixels must be a positive int or None, got {max_pixels!r}")
        fn = DecodeFn(
            field=fields,
            out=out,
            mode=mode,
            background=(int(bg[0]), int(bg[1]), int(bg[2])),
            exif_transpose=bool(exif_transpose),
            on_error=on_error,
            backend=resolve_backend(backend),
            formats=tuple(f.upper() for f in formats) if formats is not None else None,
            max_pixels=max_pixels,
            keep_encoded=bool(keep_encoded),
            missing=check_missing(missing, what),
        )
        super().__init__(fn, parallelism=parallelism, runner=runner, name=name, timeout_s=timeout_s)
