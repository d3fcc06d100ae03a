"""LitData's compact encoding of list/dict leaves (data format ``"json"``).

LitData wraps variable-length lists and nested dicts as one pytree leaf and stores it with a tag
byte: homogeneous string, int, float and bool lists and flat records get binary layouts, anything
else is JSON. Older chunks hold plain JSON text (first byte ``[`` or ``{``). All of it is data, none
of it needs code to decode, so it is read here without LitData.
"""

from __future__ import annotations

import json
import struct
from typing import Any

_U32 = struct.Struct("<I")
_I64 = struct.Struct("<q")
_F64 = struct.Struct("<d")

_JSON, _STRS, _I64S, _F64S, _BOOLS, _DICT, _RECS, _STR, _I64V, _F64V, _BOOL, _NONE = range(12)
_REC_NONE, _REC_STR, _REC_I64, _REC_F64, _REC_BOOL = 0x10, 0x11, 0x12, 0x13, 0x14


def loads(raw: bytes) -> Any:
    """Decode one ``"json"`` leaf (tagged binary or plain JSON text)."""
    if not raw or raw[0] > 0x20:
        return json.loads(raw)
    value, end = _at(raw, 0)
    if end != len(raw):
        raise ValueError(f"{len(raw) - end} trailing bytes after a nested value")
    return value


def _utf8(raw: bytes, offset: int) -> tuple[str, int]:
    (n,) = _U32.unpack_from(raw, offset)
    offset += 4
    if offset + n > len(raw):
        raise ValueError("string runs past the end of the leaf")
    return raw[offset : offset + n].decode("utf-8"), offset + n


def _fixed(raw: bytes, start: int, nbytes: int) -> bytes:
    if start + nbytes > len(raw):
        raise ValueError("array runs past the end of the leaf")
    return raw[start : start + nbytes]


def _at(raw: bytes, offset: int) -> tuple[Any, int]:
    tag = raw[offset]
    if tag in (_JSON, _STRS, _I64S, _F64S, _BOOLS, _DICT):
        (n,) = _U32.unpack_from(raw, offset + 1)
        start = offset + 5
        if tag == _JSON:
            return json.loads(_fixed(raw, start, n)), start + n
        if tag == _STRS:
            out = []
            for _ in range(n):
                s, start = _utf8(raw, start)
                out.append(s)
            return out, start
        if tag in (_I64S, _F64S):
            code = "q" if tag == _I64S else "d"
            return list(struct.unpack(f"<{n}{code}", _fixed(raw, start, 8 * n))), start + 8 * n
        if tag == _BOOLS:
            return [b != 0 for b in _fixed(raw, start, n)], start + n
        mapping: dict[str, Any] = {}
        for _ in range(n):
            key, start = _utf8(raw, start)
            mapping[key], start = _at(raw, start)
        return mapping, start
    if tag == _RECS:
        n, n_keys = struct.unpack_from("<II", raw, offset + 1)
        pos = offset + 9
        keys = []
        for _ in range(n_keys):
            k, pos = _utf8(raw, pos)
            keys.append(k)
        rows = []
        for _ in range(n):
            row: dict[str, Any] = {}
            for k in keys:
                row[k], pos = _record_value(raw, pos)
            rows.append(row)
        return rows, pos
    if tag == _STR:
        return _utf8(raw, offset + 1)
    if tag == _I64V:
        return _I64.unpack_from(raw, offset + 1)[0], offset + 9
    if tag == _F64V:
        return _F64.unpack_from(raw, offset + 1)[0], offset + 9
    if tag == _BOOL:
        return raw[offset + 1] != 0, offset + 2
    if tag == _NONE:
        return None, offset + 1
    raise ValueError(f"unknown nested-value tag {tag}")


def _record_value(raw: bytes, pos: int) -> tuple[Any, int]:
    kind = raw[pos]
    pos += 1
    if kind == _REC_NONE:
        return None, pos
    if kind == _REC_STR:
        return _utf8(raw, pos)
    if kind == _REC_I64:
        return _I64.unpack_from(raw, pos)[0], pos + 8
    if kind == _REC_F64:
        return _F64.unpack_from(raw, pos)[0], pos + 8
    if kind == _REC_BOOL:
        return raw[pos] != 0, pos + 1
    raise ValueError(f"unknown record field tag {kind}")
