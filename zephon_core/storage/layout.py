"""Datasets described by one index file (``index.json``): LitData and Mosaic Streaming MDS.

Both formats write an ``index.json`` beside their shard files that lists every shard with its
sample count and encoding, so a reader learns the whole layout from one small read and never lists
the folder. The two formats share the file name, so detection has to look inside it. What the two
readers had in common lives here: finding and reading the index (with an error naming the
dataset), telling whose index it is, and mapping a shard file (falling back to the decompressed
copy the format's own library leaves behind).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from zephon_core.errors import ReaderError
from zephon_core.storage.mapped import MappedFiles
from zephon_core.storage.readers import StorageReader

INDEX_FILE = "index.json"

L = TypeVar("L")


def index_path(root: str, name: str = INDEX_FILE) -> str:
    """The index file of a dataset ``root``, which may be the folder or the index file itself."""
    folder = root.rstrip("/")
    return folder if folder.endswith("/" + name) or folder == name else f"{folder}/{name}"


def detect_index(fs: Any, root: str, files: list[str], accept: Callable[[Any], bool], name: str = INDEX_FILE) -> bool:
    """The ``detect`` hook of an index-file format: the listing has ``name`` and ``accept`` takes its JSON.

    An unreadable or invalid index is "not this format" here; the reader reports what is wrong with
    it when the user names the format.
    """
    if name not in files:
        return False
    try:
        obj = json.loads(fs.cat_file(index_path(root, name)))
    except Exception:
        return False
    return accept(obj)


def parse_index_json(raw: bytes, where: str, accept: Callable[[Any], bool], expected: str) -> Any:
    """The JSON object of an index file, checked to be this format's.

    Args:
        raw: the file's bytes.
        where: the file's URL, which every error starts with.
        accept: True for an object of this format (the same test :func:`detect_index` uses).
        expected: what the index should be, for the error (``"an MDS index (needs ...)"``).

    Raises:
        ReaderError: invalid JSON, or another format's index.
    """
    try:
        obj = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ReaderError(f"{where}: index.json is not valid JSON ({exc})") from None
    if not accept(obj):
        raise ReaderError(f"{where}: index.json is not {expected}")
    return obj


def check_sample_indices(indices: np.ndarray, limit: int, what: str, unit: str) -> np.ndarray:
    """``indices`` as int64, every one in ``[0, limit)``; else a ReaderError naming the first bad one."""
    idx = np.asarray(indices, dtype=np.int64)
    if idx.size and (idx.min() < 0 or idx.max() >= limit):
        bad = int(idx[(idx < 0) | (idx >= limit)][0])
        raise ReaderError(f"{what}: sample index {bad} out of range ({unit} has {limit})")
    return idx


class LayoutReader(StorageReader):
    """A reader of a dataset described by one index file (LitData ``index.json``, MDS ``index.json``).

    Subclasses parse the index with :meth:`_load_layout` in ``__init__``, keep it (it pickles with
    the reader, so workers never re-read it) and create ``self._files`` (a :class:`MappedFiles`) in
    :meth:`_init_runtime`.

    Args:
        path: the dataset folder (or its index file): local path or fsspec URL.
        storage: the remaining options (:data:`~zephon_core.storage.STORAGE_OPTIONS`; anything else is
            an error).
    """

    index_file = INDEX_FILE
    _RUNTIME = ("_files",)
    _files: MappedFiles

    def _load_layout(self, parse: Callable[[bytes, str], L]) -> L:
        """Read the index file and ``parse(raw, url)`` it; an unreadable index names the dataset."""
        where = self.storage.url_of(self.index_file)
        try:
            raw = self.storage.read_bytes(self.index_file)
        except ReaderError as exc:
            raise ReaderError(f"{self.format} dataset {self.path!r}: cannot read {self.index_file} ({exc})") from None
        return parse(raw, where)

    def _check_shard(self, shard: int, count: int, unit: str) -> None:
        """A ReaderError naming the dataset unless ``0 <= shard < count``."""
        if not 0 <= shard < count:
            raise ReaderError(f"{self.format} dataset {self.path!r}: shard {shard} out of range ({count} {unit}s)")

    def _view(self, rel: str, codec: str | None, fallback: str | None, what: str) -> memoryview:
        """The bytes of shard file ``rel`` (decompressed with ``codec``), mapped once per process.

        The formats' own libraries decompress shards in place and keep only the plain copy, so when
        ``rel`` is missing the uncompressed ``fallback`` is read instead. An error names ``what``
        and the original fault.
        """
        try:
            return self._files.view(rel, codec)
        except ReaderError as exc:
            if fallback is None:
                raise ReaderError(f"{what}: {exc}") from None
            try:
                return self._files.view(fallback, None)
            except ReaderError:
                raise ReaderError(f"{what}: {exc}") from None
