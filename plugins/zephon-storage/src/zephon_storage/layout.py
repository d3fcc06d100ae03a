"""Datasets described by one index file (``index.json``): LitData and Mosaic Streaming MDS.

Both formats write an ``index.json`` beside their shard files that lists every shard with its
sample count and encoding, so a reader learns the whole layout from one small read and never lists
the folder. The two formats share the file name, so detection has to look inside it. What the two
readers had in common lives here: finding and reading the index (with an error naming the
dataset), telling whose index it is, and mapping a shard file (falling back to the decompressed
copy the format's own library leaves behind), and holding the layout to the ``zephon index``
manifest: ``index.json`` names the chunks, but nothing says a chunk deleted together with its entry,
or an ``index.json`` rewritten by a partial re-run, is not the dataset any more.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

from zephon_core import ReaderError
from zephon_storage.integrity import ALGORITHM
from zephon_storage.location import FileInfo
from zephon_storage.manifest import (
    MANIFEST,
    ManifestEntry,
    check_counts,
    check_listing,
    checksums_of,
    read_manifest,
)
from zephon_storage.mapped import MappedFiles
from zephon_storage.readers import StorageReader

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
    the reader, so workers never re-read it), implement :meth:`_layout_files` (which files the
    layout names, for the manifest) and create ``self._files`` (a :class:`MappedFiles`) in
    :meth:`_init_runtime`.

    When ``zephon index`` wrote ``_zephon_manifest.json`` beside ``index.json``, the reader holds the
    dataset to it when built: ``index.json`` must be the one indexed (its SHA-256 is recorded), and
    every chunk file must exist with its recorded size and sample count. This costs one listing of
    the folder, and only when a manifest exists.

    Args:
        path: the dataset folder (or its index file): local path or fsspec URL.
        storage: the remaining options (:data:`~zephon_storage.STORAGE_OPTIONS`,
            :data:`~zephon_storage.INTEGRITY_OPTIONS` and ``manifest``: hold the dataset to
            the manifest when there is one, default True; anything else is an error).
    """

    index_file = INDEX_FILE
    _RUNTIME = ("_files",)
    _files: MappedFiles
    _manifest_beside_file = True

    def __init__(self, path: str, storage: Mapping[str, Any]) -> None:
        rest = dict(storage)
        self.use_manifest = bool(rest.pop("manifest", True))
        super().__init__(path, rest)
        self._manifest: dict[str, ManifestEntry] | None = None
        self._checksums: dict[str, str] = {}
        self._index_bytes = 0
        self._index_checksum = ""

    @classmethod
    def _extra_options(cls) -> tuple[str, ...]:
        return ("manifest",)

    def _layout_files(self, layout: Any) -> list[tuple[Sequence[str], int]]:
        """Per shard, in order: the names its file may have (preferred first) and its sample count."""
        raise NotImplementedError

    def _load_layout(self, parse: Callable[[bytes, str], L]) -> L:
        """Read the index file and ``parse(raw, url)`` it; an unreadable index names the dataset."""
        where = self.storage.url_of(self.index_file)
        try:
            raw = self.storage.read_bytes(self.index_file)
        except ReaderError as exc:
            raise ReaderError(f"{self.format} dataset {self.path!r}: cannot read {self.index_file} ({exc})") from None
        layout = parse(raw, where)
        self._index_bytes = len(raw)
        self._index_checksum = f"{ALGORITHM}:{hashlib.sha256(raw).hexdigest()}"
        self._hold_to_manifest(layout)
        return layout

    # -- the manifest -------------------------------------------------------------------------------
    def _present(self, names: set[str]) -> dict[str, FileInfo]:
        """Which of ``names`` exist, with their sizes: one listing (one request per file for a root given as a file)."""
        if not self.storage.is_single_file:
            return {f.rel: f for f in self.storage.list_files(names.__contains__)}
        found = {}
        for rel in sorted(names):
            try:
                found[rel] = self.storage.info(rel)
            except ReaderError:
                continue
        return found

    def _chosen(self, layout: Any, present: Mapping[str, FileInfo]) -> list[tuple[str, int]]:
        """Per shard: the name its file has now (the first candidate that exists, else the preferred one) and its samples."""
        return [(next((c for c in names if c in present), names[0]), n) for names, n in self._layout_files(layout)]

    def _hold_to_manifest(self, layout: Any) -> None:
        """Check ``index.json`` and the chunk files against the manifest (when there is one)."""
        manifest = read_manifest(self.storage, self.format, beside_file=True) if self.use_manifest else None
        self._manifest = manifest
        if manifest is None:
            if self.content_checksums:
                checksums_of(self.storage, None, [])
            return
        hint = f"; if the dataset changed on purpose, rebuild {MANIFEST} with `zephon index {self.path}`"
        recorded = manifest.get(self.index_file)
        if recorded is not None and recorded.checksum and recorded.checksum != self._index_checksum:
            raise ReaderError(
                f"{self.storage.url_of(self.index_file)}: is not the {self.index_file} that was indexed "
                f"({MANIFEST} says {recorded.checksum}, it is now {self._index_checksum}){hint}"
            )
        names = {self.index_file, *(c for cands, _ in self._layout_files(layout) for c in cands)}
        present = self._present(names)
        chosen = self._chosen(layout, present)
        listed = [present[r] for r in [self.index_file, *(r for r, _ in chosen)] if r in present]
        check_listing(self.storage, listed, manifest)
        check_counts(self.storage, chosen, manifest)
        if self.content_checksums:
            self._checksums = checksums_of(self.storage, manifest, [r for r, _ in chosen])

    def _manifest_entries(self) -> list[ManifestEntry]:
        """``index.json`` (with its SHA-256, always: it is at hand) and every shard file, as they are now."""
        layout = getattr(self, "layout", None)
        if layout is None:
            raise ReaderError(f"{self.format} dataset {self.path!r}: the reader has no layout to index")
        names = {self.index_file, *(c for cands, _ in self._layout_files(layout) for c in cands)}
        present = self._present(names)
        entries = [
            ManifestEntry(self.index_file, self._index_bytes, 0, {"role": "index"}, self._index_checksum),
        ]
        for rel, n in self._chosen(layout, present):
            if rel not in present:
                raise ReaderError(f"{self.storage.url_of(rel)}: listed in {self.index_file} but missing")
            entries.append(ManifestEntry(rel, present[rel].size, n))
        return entries

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
        sums = self._checksums if self.content_checksums else {}
        if self.content_checksums and rel not in sums and fallback in sums:
            rel, codec, fallback = str(fallback), None, None  # only files with a recorded checksum are read
        try:
            return self._files.view(rel, codec, expected=sums.get(rel))
        except ReaderError as exc:
            if fallback is None or (self.content_checksums and fallback not in sums):
                raise ReaderError(f"{what}: {exc}") from None
            try:
                return self._files.view(fallback, None, expected=sums.get(fallback))
            except ReaderError:
                raise ReaderError(f"{what}: {exc}") from None

