"""LitData's ``index.json``: the chunk list and the config that says how every chunk is encoded.

``litdata.optimize`` writes one ``index.json`` beside its ``chunk-<rank>-<n>[.zstd].bin`` files::

    {"chunks": [{"filename": ..., "chunk_size": <items>, "chunk_bytes": ..., "dim": ...}, ...],
     "config": {"item_loader": "PyTreeLoader" | "TokensLoader" | ..., "data_format": [...],
                "data_spec": <pytree spec as JSON>, "compression": null | "zstd[:N]",
                "compression_level": null | "batch" | "sample", "ipc_compression": ..., ...}}

Everything a reader needs to know before touching a chunk is here, so shard sizes cost one small
read and no chunk I/O. Whatever this module cannot read natively is refused here, at construction,
with a message that says why.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from zephon_storage import parse_index_json

from zephon_core import ReaderError

LOADERS = ("PyTreeLoader", "TokensLoader")


@dataclass(frozen=True, slots=True)
class ChunkEntry:
    """One chunk file as listed in ``index.json``.

    Attributes:
        filename: path relative to the dataset root.
        items: number of items written into the chunk (the header must agree).
        dim: total tokens in the chunk (TokensLoader datasets only).
    """

    filename: str
    items: int
    dim: int | None


@dataclass(frozen=True, slots=True)
class Layout:
    """What ``index.json`` says about a LitData dataset.

    Attributes:
        chunks: the chunk files, in the order LitData numbers samples.
        loader: ``PyTreeLoader`` (one item per sample) or ``TokensLoader`` (fixed-size token blocks).
        data_format: one serializer name per pytree leaf.
        data_spec: the pytree structure (LitData's treespec JSON), or None.
        compression: ``"zstd[:N]"`` or None.
        level: how chunks are compressed: ``"none"``, ``"chunk"`` (whole ``.zstd.bin`` file),
            ``"batch"`` (zstd frames of item groups inside ``.bin``) or ``"sample"`` (one frame per item).
        digest: SHA-256 of ``index.json``, the dataset's identity in pipeline fingerprints.
    """

    chunks: tuple[ChunkEntry, ...]
    loader: str
    data_format: tuple[str, ...]
    data_spec: str | None
    compression: str | None
    level: str
    digest: str


def is_litdata_index(obj: Any) -> bool:
    """True for an ``index.json`` object written by LitData (and not a Parquet index, read elsewhere)."""
    if not isinstance(obj, dict) or not isinstance(obj.get("chunks"), list):
        return False
    config = obj.get("config")
    return isinstance(config, dict) and config.get("item_loader") != "ParquetLoader" and "shards" not in obj


def parse_layout(raw: bytes, where: str) -> Layout:
    """Parse and check ``index.json``; refuse what cannot be read natively, naming the reason."""
    obj = parse_index_json(raw, where, is_litdata_index, "a LitData index (needs 'chunks' and 'config')")
    config: dict[str, Any] = obj["config"]
    loader = config.get("item_loader") or "PyTreeLoader"
    if loader not in LOADERS:
        raise ReaderError(f"{where}: LitData item_loader {loader!r} is not supported (supported: {', '.join(LOADERS)})")
    if config.get("encryption"):
        raise ReaderError(f"{where}: encrypted LitData chunks are not supported")
    data_format = config.get("data_format") or []
    if not isinstance(data_format, list) or not all(isinstance(f, str) for f in data_format):
        raise ReaderError(f"{where}: config.data_format must be a list of strings, got {data_format!r}")
    compression = config.get("compression") or None
    if compression is not None and not str(compression).startswith("zstd"):
        raise ReaderError(f"{where}: LitData compression {compression!r} is not supported (only zstd)")
    level = _level(config.get("compression_level"), compression, where)
    chunks = tuple(_chunk(c, i, where) for i, c in enumerate(obj["chunks"]))
    if loader == "TokensLoader" and any(c.dim is None for c in chunks):
        raise ReaderError(f"{where}: a TokensLoader index must give every chunk's 'dim' (token count)")
    spec = config.get("data_spec")
    return Layout(
        chunks=chunks,
        loader=loader,
        data_format=tuple(data_format),
        data_spec=spec if isinstance(spec, str) else None,
        compression=compression,
        level=level,
        digest=hashlib.sha256(raw).hexdigest(),
    )


def _level(value: Any, compression: str | None, where: str) -> str:
    if compression is None:
        return "none"
    if value in (None, ""):
        return "chunk"  # LitData's own reading of an index without a level: whole-file .zstd.bin
    if value not in ("chunk", "batch", "sample"):
        raise ReaderError(f"{where}: unknown compression_level {value!r} (expected chunk, batch or sample)")
    return str(value)


def _chunk(c: Any, i: int, where: str) -> ChunkEntry:
    if not isinstance(c, dict):
        raise ReaderError(f"{where}: chunks[{i}] is not an object")
    name, items, dim = c.get("filename"), c.get("chunk_size"), c.get("dim")
    if not isinstance(name, str) or not name or name.startswith("/") or ".." in name.split("/"):
        raise ReaderError(f"{where}: chunks[{i}] has a bad filename {name!r}")
    if not isinstance(items, int) or isinstance(items, bool) or items < 0:
        raise ReaderError(f"{where}: chunks[{i}] ({name}) has a bad chunk_size {items!r}")
    if dim is not None and (not isinstance(dim, int) or dim < 0):
        raise ReaderError(f"{where}: chunks[{i}] ({name}) has a bad dim {dim!r}")
    return ChunkEntry(name, items, dim)
