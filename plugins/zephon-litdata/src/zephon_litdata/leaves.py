"""Decoders for LitData's pytree leaves, one per ``data_format`` name, without torch or LitData.

Each sample in a pytree chunk is ``uint32 size[n_leaves]`` followed by the leaves' bytes; the
``data_format`` list in ``index.json`` names the serializer that wrote each leaf. Tensors come back
as numpy arrays (same dtype, same shape), encoded media (JPEG, image and file leaves) as their
bytes — decode them in a ``map_transform``, where the work can be parallelised. Pickled leaves are
refused: unpickling data runs arbitrary code.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import numpy as np

from zephon_litdata import nested

Decoder = Callable[[memoryview], Any]

NUMPY_DTYPES: dict[int, str] = {
    0: "int8",
    1: "int16",
    2: "int32",
    3: "int64",
    4: "uint8",
    5: "uint16",
    6: "uint32",
    7: "uint64",
    8: "float16",
    9: "float32",
    10: "float64",
    11: "complex64",
    12: "complex128",
    13: "bool",
}
"""LitData's numpy dtype table (``litdata.constants._NUMPY_DTYPES_MAPPING``), minus object/str/void."""

TORCH_DTYPES: dict[int, str] = {
    0: "float32",
    1: "float32",
    2: "float64",
    3: "float64",
    4: "complex64",
    5: "complex64",
    6: "complex128",
    7: "complex128",
    8: "float16",
    9: "float16",
    11: "uint8",
    12: "int8",
    13: "int16",
    14: "int16",
    15: "int32",
    16: "int32",
    17: "int64",
    18: "int64",
    19: "bool",
    20: "uint16",
}
"""LitData's torch dtype table (``_TORCH_DTYPES_MAPPING``) as numpy dtypes; 10 is bfloat16 (no numpy twin)."""

_BYTES_MEDIA = ("jpeg", "image", "file", "pdf", "tiff", "tifffile")
_PIL_MODES: dict[str, tuple[str, int]] = {"L": ("uint8", 1), "RGB": ("uint8", 3), "RGBA": ("uint8", 4)}
_PIL_MODES |= {"I": ("int32", 1), "F": ("float32", 1), "I;16": ("uint16", 1)}

SUPPORTED = (
    "str, text, int, float, bool, bytes, numpy, no_header_numpy:<dtype>, tensor, no_header_tensor:<dtype>, "
    "json, pil (as an array), jpeg / image / file / pdf / tiff (as encoded bytes)"
)


class UnsupportedFormat(ValueError):
    """A ``data_format`` name this reader cannot decode natively."""


def decoder_for(name: str) -> Decoder:
    """The decoder for one ``data_format`` entry; :class:`UnsupportedFormat` says why not."""
    base, _, arg = name.partition(":")
    simple: dict[str, Decoder] = {
        "str": _str,
        "text": _str,
        "int": _int,
        "float": _float,
        "bool": _bool,
        "bytes": bytes,
        "numpy": _numpy,
        "tensor": _tensor,
        "json": _json,
        "pil": _pil,
    }
    if base in simple and not arg:
        return simple[base]
    if base in _BYTES_MEDIA:
        return bytes
    if base in ("no_header_numpy", "no_header_tensor"):
        table = NUMPY_DTYPES if base == "no_header_numpy" else TORCH_DTYPES
        dtype = _table_dtype(table, arg, name)
        return lambda raw: np.frombuffer(raw, dtype=dtype).copy()
    if base == "pickle":
        raise UnsupportedFormat(
            "leaves stored with LitData's 'pickle' serializer are not supported: reading them would mean "
            "unpickling, which runs arbitrary code. Re-write the dataset with plain types (str, int, float, "
            "bytes, numpy arrays, lists/dicts of those)"
        )
    raise UnsupportedFormat(f"LitData data format {name!r} is not supported natively (supported: {SUPPORTED})")


def flat_dtype(name: str) -> np.dtype:
    """The element dtype of a headerless array format (what a TokensLoader chunk holds)."""
    base, _, arg = name.partition(":")
    if base == "no_header_numpy":
        return _table_dtype(NUMPY_DTYPES, arg, name)
    if base == "no_header_tensor":
        return _table_dtype(TORCH_DTYPES, arg, name)
    raise UnsupportedFormat(f"a TokensLoader chunk must hold no_header_numpy/no_header_tensor data, not {name!r}")


def _table_dtype(table: dict[int, str], arg: str, name: str) -> np.dtype:
    try:
        return np.dtype(table[int(arg)])
    except (KeyError, ValueError):
        what = "bfloat16 (no numpy dtype)" if name == "no_header_tensor:10" else "an unknown dtype code"
        raise UnsupportedFormat(f"LitData data format {name!r} holds {what}") from None


def _str(raw: memoryview) -> str:
    return str(raw, "utf-8")


def _int(raw: memoryview) -> int:
    return int(struct.unpack("<q", raw)[0])


def _float(raw: memoryview) -> float:
    return float(struct.unpack("<d", raw)[0])


def _bool(raw: memoryview) -> bool:
    if len(raw) != 1:
        raise ValueError(f"a bool leaf has 1 byte, got {len(raw)}")
    return raw[0] != 0


def _json(raw: memoryview) -> Any:
    return nested.loads(bytes(raw))


def _numpy(raw: memoryview) -> np.ndarray:
    code, ndim = struct.unpack_from("<II", raw, 0)
    if code not in NUMPY_DTYPES:
        raise ValueError(f"numpy leaf has unsupported dtype code {code} (object/str/void arrays need pickle)")
    shape = struct.unpack_from(f"<{ndim}I", raw, 8)
    arr = np.frombuffer(raw, dtype=NUMPY_DTYPES[code], offset=8 + 4 * ndim)
    return arr.reshape(shape).copy()


def _tensor(raw: memoryview) -> np.ndarray:
    code, ndim = struct.unpack_from(">II", raw, 0)
    if code not in TORCH_DTYPES:
        raise ValueError(f"tensor leaf has unsupported dtype code {code} (10 is bfloat16, which numpy lacks)")
    shape = struct.unpack_from(f">{ndim}I", raw, 8)
    arr = np.frombuffer(raw, dtype=TORCH_DTYPES[code], offset=8 + 4 * ndim)
    return arr.reshape(shape).copy()


def _pil(raw: memoryview) -> np.ndarray:
    width, height, mode_len = struct.unpack_from("<III", raw, 0)
    mode = str(raw[12 : 12 + mode_len], "utf-8")
    if mode not in _PIL_MODES:
        raise ValueError(f"PIL image mode {mode!r} is not supported (supported: {', '.join(_PIL_MODES)})")
    dtype, channels = _PIL_MODES[mode]
    arr = np.frombuffer(raw, dtype=dtype, offset=12 + mode_len)
    shape = (height, width) if channels == 1 else (height, width, channels)
    return arr.reshape(shape).copy()
