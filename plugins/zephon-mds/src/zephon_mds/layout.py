"""Mosaic Streaming's ``index.json`` for MDS datasets: the shard list with each shard's columns.

``streaming.MDSWriter`` writes ``{"version": 2, "shards": [...]}`` where every shard says::

    {"format": "mds", "samples": <n>, "column_names": [...], "column_encodings": [...],
     "column_sizes": [<bytes or null>, ...], "compression": null | "zstd[:N]" | "gz" | ...,
     "raw_data": {"basename": "shard.00000.mds", "bytes": ...},
     "zip_data": null | {"basename": "shard.00000.mds.zstd", "bytes": ...}, ...}

Shard sizes therefore cost one small read and no shard I/O. Columns that cannot be decoded
natively (``pkl``, unknown encodings) are refused here, before any data is read.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from zephon_storage import parse_index_json

from zephon_core import ReaderError
from zephon_mds.codecs import CODECS, codec_of


@dataclass(frozen=True, slots=True)
class ShardEntry:
    """One MDS shard as listed in ``index.json``.

    Attributes:
        raw: path of the uncompressed shard, relative to the root.
        raw_bytes: its size, when the index gives it (a mismatch means truncation).
        zip: path of the compressed shard, if the shard was compressed.
        codec: compression family of ``zip`` (``zstd``, ``gz``, ``bz2``, ``br``, ``snappy``).
        samples: number of samples (the shard header must agree).
        columns: column names, in stored order.
        encodings: one MDS encoding per column.
        sizes: fixed byte size per column, or None for variable-size columns.
        hashes: digests of the uncompressed shard by algorithm name (``sha1``, ``xxh64``, ...),
            as the writer's ``hashes=`` option recorded them.
    """

    raw: str
    raw_bytes: int | None
    zip: str | None
    codec: str | None
    samples: int
    columns: tuple[str, ...]
    encodings: tuple[str, ...]
    sizes: tuple[int | None, ...]
    hashes: tuple[tuple[str, str], ...] = ()

    @property
    def filename(self) -> str:
        """The file this reader opens: the compressed one when present (``raw`` may not exist)."""
        return self.zip or self.raw


@dataclass(frozen=True, slots=True)
class Layout:
    """What ``index.json`` says about an MDS dataset.

    Attributes:
        shards: in index order (the order Streaming numbers samples).
        digest: SHA-256 of ``index.json``, the dataset's identity in pipeline fingerprints.
    """

    shards: tuple[ShardEntry, ...]
    digest: str


def is_mds_index(obj: Any) -> bool:
    """True for an ``index.json`` object whose shards are MDS shards (not Streaming's JSON/CSV ones)."""
    if not isinstance(obj, dict) or "chunks" in obj:
        return False
    shards = obj.get("shards")
    return (
        isinstance(shards, list)
        and bool(shards)
        and all(isinstance(s, dict) and s.get("format") == "mds" and "column_encodings" in s for s in shards)
    )


def parse_layout(raw: bytes, where: str) -> Layout:
    """Parse and check ``index.json``; refuse what cannot be read natively, naming the shard."""
    obj = parse_index_json(raw, where, is_mds_index, "an MDS index (needs 'shards' of format 'mds')")
    if obj.get("version", 2) != 2:
        raise ReaderError(f"{where}: MDS index version {obj.get('version')!r} is not supported (only 2)")
    shards = tuple(_shard(s, i, where) for i, s in enumerate(obj["shards"]))
    return Layout(shards, hashlib.sha256(raw).hexdigest())


def _path(info: Any, key: str, i: int, where: str) -> tuple[str, int | None] | None:
    if info is None:
        return None
    name = info.get("basename") if isinstance(info, dict) else None
    if not isinstance(name, str) or not name or name.startswith("/") or ".." in name.split("/"):
        raise ReaderError(f"{where}: shards[{i}].{key} has a bad basename {name!r}")
    size = info.get("bytes")
    return name, size if isinstance(size, int) and not isinstance(size, bool) else None


def _hashes(info: Any) -> tuple[tuple[str, str], ...]:
    found = info.get("hashes") if isinstance(info, dict) else None
    if not isinstance(found, dict):
        return ()
    return tuple(sorted((str(k), str(v)) for k, v in found.items()))


def _shard(s: dict[str, Any], i: int, where: str) -> ShardEntry:
    raw = _path(s.get("raw_data"), "raw_data", i, where)
    if raw is None:
        raise ReaderError(f"{where}: shards[{i}] has no raw_data")
    zipped = _path(s.get("zip_data"), "zip_data", i, where)
    codec = codec_of(s.get("compression")) if zipped else None
    label = f"{where}: shard {raw[0]!r}"
    if zipped and codec not in CODECS:
        raise ReaderError(f"{label}: compression {s.get('compression')!r} is not supported ({', '.join(CODECS)})")
    samples = s.get("samples")
    if not isinstance(samples, int) or isinstance(samples, bool) or samples < 0:
        raise ReaderError(f"{label}: bad sample count {samples!r}")
    names, encodings, sizes = s.get("column_names"), s.get("column_encodings"), s.get("column_sizes")
    if not (isinstance(names, list) and isinstance(encodings, list) and isinstance(sizes, list)):
        raise ReaderError(f"{label}: column_names/column_encodings/column_sizes must be lists")
    if not len(names) == len(encodings) == len(sizes):
        raise ReaderError(f"{label}: {len(names)} column names, {len(encodings)} encodings, {len(sizes)} sizes")
    if any(z is not None and (not isinstance(z, int) or z < 0) for z in sizes):
        raise ReaderError(f"{label}: bad column_sizes {sizes!r}")
    return ShardEntry(
        raw=raw[0],
        raw_bytes=raw[1],
        zip=zipped[0] if zipped else None,
        codec=codec,
        samples=samples,
        columns=tuple(map(str, names)),
        encodings=tuple(map(str, encodings)),
        sizes=tuple(sizes),
        hashes=_hashes(s.get("raw_data")),
    )
