"""Decoders for MDS column encodings, written from the format, without ``mosaicml-streaming``.

Values come back as Streaming's own ``mds_decode`` returns them where that is plain data: ``int``
as a Python int, fixed-width scalars (``int8`` … ``float64``) as numpy scalars, ``ndarray`` as a numpy
array, ``json`` as Python objects. Image columns come back without PIL: ``jpeg``/``png`` as their
encoded bytes (decode them in a ``map_transform``, where the work can be parallelised) and ``pil``
as an ``(height, width[, channels])`` array. ``pkl`` columns are refused: unpickling runs code.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import numpy as np

Decoder = Callable[[memoryview], Any]

SCALARS = ("uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64", "float16", "float32", "float64")
_VALUE_DTYPES = {8: "uint8", 9: "int8", 16: "uint16", 17: "int16", 18: "float16", 32: "uint32", 33: "int32"}
_VALUE_DTYPES |= {34: "float32", 64: "uint64", 65: "int64", 66: "float64"}
_SHAPE_DTYPES = ("<u1", "<u2", "<u4", "<u8")
_PIL_MODES: dict[str, tuple[str, int]] = {"L": ("uint8", 1), "RGB": ("uint8", 3), "RGBA": ("uint8", 4)}
_PIL_MODES |= {"I": ("int32", 1), "F": ("float32", 1), "I;16": ("uint16", 1)}

SUPPORTED = (
    "bytes, str, int, uint8..uint64, int8..int64, float16/32/64, str_int, str_float, str_decimal, "
    "ndarray[:dtype[:shape]], json, jpeg, png, pil, list[jpeg], list[png], list[pil], jpeg_array"
)


class UnsupportedEncoding(ValueError):
    """An MDS encoding this reader cannot decode natively."""


def decoder_for(encoding: str) -> Decoder:
    """The decoder of one column encoding; :class:`UnsupportedEncoding` says why not."""
    name, _, arg = encoding.partition(":")
    if name == "ndarray":
        return _ndarray(arg, encoding)
    if arg:
        raise UnsupportedEncoding(f"MDS encoding {encoding!r} is not supported (supported: {SUPPORTED})")
    if name in SCALARS:
        dtype = np.dtype(name).newbyteorder("<")
        return lambda raw: np.frombuffer(raw, dtype=dtype, count=1)[0]
    simple: dict[str, Decoder] = {
        "bytes": bytes,
        "jpeg": bytes,
        "png": bytes,
        "str": lambda raw: str(raw, "utf-8"),
        "int": lambda raw: int(struct.unpack("<q", raw)[0]),
        "str_int": lambda raw: int(str(raw, "utf-8")),
        "str_float": lambda raw: float(str(raw, "utf-8")),
        "str_decimal": lambda raw: Decimal(str(raw, "utf-8")),
        "json": lambda raw: json.loads(bytes(raw)),
        "pil": _pil,
        "list[jpeg]": lambda raw: _list(raw, bytes),
        "list[png]": lambda raw: _list(raw, bytes),
        "list[pil]": lambda raw: _list(raw, _pil),
        "jpeg_array": _jpeg_array,
        "jpegarray": _jpeg_array,
    }
    if name in simple:
        return simple[name]
    if name == "pkl":
        raise UnsupportedEncoding(
            "the 'pkl' encoding is not supported: reading it would mean unpickling, which runs arbitrary "
            "code. Re-write the column with a plain encoding (json, str, bytes, ndarray, ...)"
        )
    raise UnsupportedEncoding(f"MDS encoding {encoding!r} is not supported (supported: {SUPPORTED})")


def fixed_size(encoding: str) -> int | None:
    """The byte size every value of ``encoding`` has, or None if it varies (checks ``column_sizes``)."""
    name, _, arg = encoding.partition(":")
    if name in SCALARS:
        return np.dtype(name).itemsize
    if name == "int":
        return 8
    if name == "ndarray":
        parts = arg.split(":") if arg else []
        if len(parts) == 2:
            return int(np.prod([int(d) for d in parts[1].split(",")])) * np.dtype(parts[0]).itemsize
    return None


def _ndarray(arg: str, encoding: str) -> Decoder:
    parts = arg.split(":") if arg else []
    if len(parts) > 2:
        raise UnsupportedEncoding(f"MDS encoding {encoding!r} is malformed (ndarray[:dtype[:shape]])")
    dtype = parts[0] if parts else None
    if dtype is not None and dtype not in _VALUE_DTYPES.values():
        raise UnsupportedEncoding(f"MDS encoding {encoding!r}: unsupported dtype {dtype!r}")
    try:
        shape = tuple(int(d) for d in parts[1].split(",")) if len(parts) == 2 else None
    except ValueError:
        raise UnsupportedEncoding(f"MDS encoding {encoding!r}: bad shape {parts[1]!r}") from None

    def decode(raw: memoryview) -> np.ndarray:
        pos = 0
        dt = dtype
        if dt is None:
            code = raw[0]
            if code not in _VALUE_DTYPES:
                raise ValueError(f"ndarray value has unknown dtype code {code}")
            dt, pos = _VALUE_DTYPES[code], 1
        shp = shape
        if shp is None:
            head = raw[pos]
            ndim, width = head >> 2, head & 3
            shp = tuple(np.frombuffer(raw, dtype=_SHAPE_DTYPES[width], count=ndim, offset=pos + 1).tolist())
            pos += 1 + ndim * (1 << width)
        values = np.frombuffer(raw, dtype=np.dtype(dt).newbyteorder("<"), offset=pos)
        return values.reshape(shp).copy()

    return decode


def _list(raw: memoryview, item: Decoder) -> list[Any]:
    (n,) = struct.unpack_from("<I", raw, 4)  # the first uint32 is a placeholder
    sizes = struct.unpack_from(f"<{n}I", raw, 8)
    pos, out = 8 + 4 * n, []
    for size in sizes:
        if pos + size > len(raw):
            raise ValueError("list element runs past the end of the value")
        out.append(item(raw[pos : pos + size]))
        pos += size
    return out


def _jpeg_array(raw: memoryview) -> list[bytes]:
    (n,) = struct.unpack_from("<I", raw, 0)
    sizes = struct.unpack_from(f"<{n}I", raw, 4)
    pos, out = 4 + 4 * n, []
    for size in sizes:
        if pos + size > len(raw):
            raise ValueError("image runs past the end of the value")
        out.append(bytes(raw[pos : pos + size]))
        pos += size
    return out


def _pil(raw: memoryview) -> np.ndarray:
    width, height, mode_len = struct.unpack_from("<III", raw, 0)
    mode = str(raw[12 : 12 + mode_len], "utf-8")
    if mode not in _PIL_MODES:
        raise ValueError(f"PIL image mode {mode!r} is not supported (supported: {', '.join(_PIL_MODES)})")
    dtype, channels = _PIL_MODES[mode]
    arr = np.frombuffer(raw, dtype=dtype, offset=12 + mode_len)
    shape = (height, width) if channels == 1 else (height, width, channels)
    return arr.reshape(shape).copy()
