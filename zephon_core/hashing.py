"""Hashing: batch fingerprints for determinism checks, and counter-based randomness.

A batch digest covers everything that could differ: key names, dtypes, shapes and bytes, in a fixed key
order. Randomness is derived by hashing, so a record's draw depends only on its identity, not on
grouping, parallelism or restarts."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

_M64 = (1 << 64) - 1


def hash_arrays(arrays: Mapping[str, np.ndarray], h: Any = None) -> str:
    """SHA-256 over each array's name, dtype, shape and bytes, keys in sorted order."""
    h = h or hashlib.sha256()
    for key in sorted(arrays):
        arr = np.asarray(arrays[key])
        if arr.dtype == object:
            raise TypeError(f"cannot hash object array {key!r}: give it a fixed dtype")
        h.update(key.encode())
        h.update(arr.dtype.str.encode())
        h.update(repr(arr.shape).encode())
        h.update(np.ascontiguousarray(arr).tobytes())
    return str(h.hexdigest())


def hash_global_batch(batches: Iterable[Any]) -> str:
    """Digest of one global step: every lane's microbatches (:class:`~zephon_core.runtime.types.SampleBatch`,
    from any number of ranks) concatenated per lane in lane order, so it does not depend on how the step
    was split into microbatches and gradient-accumulation steps."""
    by_lane: dict[int, list[Any]] = {}
    for b in batches:
        by_lane.setdefault(b.lane, []).append(b)
    h = hashlib.sha256()
    for lane in sorted(by_lane):
        parts = sorted(by_lane[lane], key=lambda b: b.lane_index)
        data = [p.to_training() for p in parts]
        merged = {k: np.concatenate([d[k] for d in data]) for k in data[0]}
        h.update(f"lane{lane}".encode())
        hash_arrays(merged, h)
    return h.hexdigest()


def stable_hash64(*parts: Any) -> int:
    """A 64-bit integer from JSON-able parts; identical on every machine and Python process."""
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str).encode()
    return int.from_bytes(hashlib.blake2b(blob, digest_size=8).digest(), "little")


def splitmix64(x: np.ndarray | int) -> np.ndarray:
    """Vectorised SplitMix64 finaliser: a fast, well-mixed bijection on uint64."""
    z = np.asarray(x, dtype=np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    out: np.ndarray = z ^ (z >> np.uint64(31))
    return out


def _splitmix64_int(x: int) -> int:
    """SplitMix64 on one Python int: the same values as :func:`splitmix64`, without numpy overhead."""
    z = (x + 0x9E3779B97F4A7C15) & _M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def mix64(a: int, b: int) -> int:
    """Combine two 64-bit identities into one (used for child and merged record identities)."""
    return _splitmix64_int((a * 0x9E3779B97F4A7C15 + b) & _M64)


def uniforms(key: int, ids: Sequence[int] | np.ndarray) -> np.ndarray:
    """One float in [0, 1) per id, a pure function of (key, id)."""
    ids = np.asarray(ids, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = splitmix64(ids ^ np.uint64(key & _M64))
    out: np.ndarray = (z >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))
    return out


def _feed(h: Any, obj: Any) -> None:
    if isinstance(obj, dict):
        h.update(b"{")
        for k in sorted(obj, key=str):
            h.update(repr(k).encode())
            _feed(h, obj[k])
        h.update(b"}")
    elif isinstance(obj, np.ndarray):
        if obj.dtype == object:
            h.update(b"O[")
            for x in obj.ravel().tolist():
                _feed(h, x)
            h.update(b"]")
        else:
            h.update(f"a{obj.dtype.str}{obj.shape}".encode())
            h.update(np.ascontiguousarray(obj).tobytes())
    elif isinstance(obj, (list, tuple)):
        h.update(b"[" if isinstance(obj, list) else b"(")
        for x in obj:
            _feed(h, x)
        h.update(b"]")
    elif isinstance(obj, (bytes, bytearray, memoryview)):
        h.update(b"b%d:" % len(obj))
        h.update(bytes(obj))
    elif isinstance(obj, np.generic):
        h.update(f"s{obj.dtype.str}".encode())
        h.update(obj.tobytes())
    else:
        h.update(f"{type(obj).__name__}:{obj!r};".encode())


def digest_payload(obj: Any) -> bytes:
    """SHA-256 of any payload (dicts, arrays, scalars, strings, nested lists), type- and dtype-aware."""
    h = hashlib.sha256()
    _feed(h, obj)
    return h.digest()
