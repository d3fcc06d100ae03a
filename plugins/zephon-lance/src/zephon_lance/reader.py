"""``LanceReader``: a Lance dataset at one pinned version, one shard per fragment.

A Lance dataset is a folder of data files plus one manifest per version; a manifest lists the
fragments (each a group of rows in one or more data files) and, per fragment, a deletion file of
rows deleted since. Versions are immutable, so a reader pins one — the ``version=`` option, or the
latest at open time — and keeps reading it after later appends, deletes or overwrites. The pinned
version and a digest of its fragment listing go into :meth:`LanceReader.describe`, hence into the
pipeline fingerprint: a resume against a dataset that has moved on is refused with a diff naming
the version, instead of silently reading other rows.

Shard ``k`` is the ``k``-th fragment of the manifest (the dataset's own row order), its id
``fragment-<id>``, its size the fragment's *live* rows. Index ``i`` of a shard is the ``i``-th live
row of the fragment in physical order — Lance's own fragment ``take`` addressing, which skips
deleted rows — so indices are dense and deterministic for a pinned version. ``read`` sorts and
de-duplicates the indices (Lance wants them strictly increasing), issues one ``take`` per call and
scatters rows back to the requested order.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import lance
import numpy as np
from zephon_storage import in_request_order

from zephon_core import ConfigError, ReaderError, ShardInfo
from zephon_core.plugin_api import Reader

_RUST_LOCATION = re.compile(r",?\s*/\S+\.rs:\d+:\d+")


def _message(exc: BaseException) -> str:
    """``Type: message`` without the Rust source locations pylance appends to every error."""
    text = _RUST_LOCATION.sub("", str(exc)).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def _library_fault(exc: BaseException) -> BaseException:
    """Return ``exc`` if it is a library failure; re-raise interpreter exits and interrupts.

    A Rust panic surfaces as pyo3's ``PanicException``, a ``BaseException`` that cannot be
    imported, so it is recognised by name.
    """
    if isinstance(exc, Exception) or type(exc).__name__ == "PanicException":
        return exc
    raise exc


@dataclass(frozen=True, slots=True)
class Fragment:
    """One fragment of the pinned version: its id, live rows and data files (relative to the root)."""

    id: int
    rows: int
    files: tuple[str, ...]
    deleted: int


class LanceReader(Reader):
    """Reads a Lance dataset (written by ``lance.write_dataset``) at one version.

    Args:
        path: the dataset's root (a folder such as ``/data/web.lance``, a ``file://`` URL, or an
            object-store URI Lance understands itself, such as ``s3://bucket/web.lance``).
        version: the version to read (a number, or a tag name resolved to its number at open
            time). Default: the latest version when the reader is opened. Either way the number is
            recorded in :meth:`describe` (and so in checkpoints), and every worker process reads it.
        columns: read only these columns, in this order; each must exist in the dataset.
        storage_options: passed to ``lance.dataset`` (Lance's own object-store options, e.g.
            ``aws_endpoint``, ``aws_access_key_id``; not fsspec's).

    Raises:
        ConfigError: an unknown option or an option of the wrong type.
        ReaderError: no Lance dataset at ``path``, no such version, or a column missing.
    """

    format: ClassVar[str] = "lance"
    OPTIONS: ClassVar[tuple[str, ...]] = ("columns", "storage_options", "version")

    def __init__(
        self,
        path: str,
        *,
        version: int | str | None = None,
        columns: Sequence[str] | None = None,
        storage_options: dict[str, str] | None = None,
        **unknown: Any,
    ) -> None:
        if unknown:
            raise ConfigError(f"lance reader: unknown option(s) {sorted(unknown)}; valid options: {list(self.OPTIONS)}")
        if version is not None and (isinstance(version, bool) or not isinstance(version, (int, str))):
            raise ConfigError(f"lance reader: version must be a version number or a tag name, got {version!r}")
        if isinstance(version, int) and version < 1:
            raise ConfigError(f"lance reader: versions start at 1, got {version}")
        if columns is not None and (isinstance(columns, str) or not all(isinstance(c, str) for c in columns)):
            raise ConfigError(f"lance: columns must be a list of names, got {columns!r}")
        if storage_options is not None and not isinstance(storage_options, dict):
            raise ConfigError(f"lance reader: storage_options must be a dict, got {type(storage_options).__name__}")
        self.path = path
        self.uri = os.path.abspath(path) if "://" not in path else path  # worker processes may chdir
        self.columns = None if columns is None else list(columns)
        self.storage_options = dict(storage_options) if storage_options else None
        self._init_runtime()
        ds = self._open_version(version)
        self.version: int = int(ds.version)
        self.schema_names: list[str] = list(ds.schema.names)
        if self.columns is not None:
            missing = [c for c in self.columns if c not in self.schema_names]
            if missing:
                raise ReaderError(f"{self._where()}: has no column(s) {missing} (columns: {self.schema_names})")
        self.fragments: list[Fragment] = self._list(ds)
        with self._lock:
            self._ds = ds

    # -- opening ------------------------------------------------------------------------------------
    def _init_runtime(self) -> None:
        self._lock = threading.Lock()
        self._ds: Any = None
        self._handles: dict[int, Any] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in ("_lock", "_ds", "_handles")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_runtime()

    def _where(self, version: int | str | None = None) -> str:
        """The dataset (and version) as every message names it."""
        v = getattr(self, "version", None) if version is None else version
        return f"{self.path}" + (f" (version {v})" if v is not None else "")

    def _open_version(self, version: int | str | None) -> Any:
        try:
            return lance.dataset(self.uri, version=version, storage_options=self.storage_options)
        except BaseException as exc:  # also Rust panics: see _library_fault
            _library_fault(exc)
            text = _message(exc)
            if version is not None and (re.search(r"_versions/\d+\.manifest", text) or "not found" in text.lower()):
                if self._exists(None):
                    raise ReaderError(f"{self.path}: Lance dataset has no version {version!r} ({text})") from None
            raise ReaderError(f"{self.path}: not a readable Lance dataset ({text})") from None

    def _exists(self, version: int | str | None) -> bool:
        try:
            lance.dataset(self.uri, version=version, storage_options=self.storage_options)
            return True
        except Exception:
            return False

    def _dataset(self) -> Any:
        """The dataset at the pinned version, opened once per process."""
        with self._lock:
            if self._ds is None:
                self._ds = self._open_version(self.version)
            return self._ds

    def _handle(self, k: int) -> Any:
        """Fragment ``k``'s handle from the pinned version, kept for the reader's life."""
        with self._lock:
            hit = self._handles.get(k)
        if hit is not None:
            return hit
        frag = self._dataset().get_fragment(self.fragments[k].id)
        if frag is None:  # cannot happen for an immutable version: say so rather than crash
            raise ReaderError(f"{self._name(k)}: not in the dataset's manifest")
        with self._lock:
            return self._handles.setdefault(k, frag)

    # -- listing ------------------------------------------------------------------------------------
    def _list(self, ds: Any) -> list[Fragment]:
        """Fragments of the pinned version in manifest order, with live row counts (no data read).

        The manifest records physical rows and, per deletion file, how many rows it deletes; only
        when a (very old) deletion file lacks that count is it read through ``count_rows``.
        """
        out = []
        try:
            for frag in ds.get_fragments():
                meta = frag.metadata
                deletion = meta.deletion_file
                deleted = 0 if deletion is None else deletion.num_deleted_rows
                rows = frag.count_rows() if deleted is None else int(meta.physical_rows) - int(deleted)
                files = tuple(f"data/{f.path}" for f in meta.files)
                out.append(Fragment(int(frag.fragment_id), int(rows), files, int(meta.physical_rows) - rows))
        except BaseException as exc:  # also Rust panics: see _library_fault
            _library_fault(exc)
            raise ReaderError(f"{self._where()}: cannot list fragments ({_message(exc)})") from None
        return out

    def shards(self) -> list[ShardInfo]:
        """One shard per fragment, in manifest order; sizes count live (not deleted) rows."""
        return [ShardInfo(f"fragment-{f.id}", f.rows) for f in self.fragments]

    def describe(self) -> dict[str, Any]:
        """The fingerprint: the pinned version and a digest of its fragments (ids, files, deletions).

        Every commit makes a new version number, but a dataset deleted and written anew starts again
        at version 1: the digest (data file names are random) tells the two apart.
        """
        listing = [[f.id, f.rows, list(f.files), f.deleted] for f in self.fragments]
        digest = hashlib.sha256(json.dumps(listing, separators=(",", ":")).encode()).hexdigest()[:16]
        return {"format": self.format, "version": self.version, "fragments": digest, "columns": self.columns}

    # -- reading ------------------------------------------------------------------------------------
    def _name(self, k: int) -> str:
        f = self.fragments[k]
        return f"{self._where()}: fragment {f.id} ({', '.join(f.files)})"

    def read(self, shard: int, indices: np.ndarray) -> list[dict[str, Any]]:
        """Live rows ``indices`` of fragment ``shard``: one sorted ``take``, scattered to request order."""
        if not 0 <= shard < len(self.fragments):
            raise ReaderError(f"{self._where()}: shard {shard} does not exist ({len(self.fragments)} fragments)")
        indices = np.asarray(indices, dtype=np.int64).reshape(-1)
        if len(indices) == 0:
            return []
        n = self.fragments[shard].rows
        if indices.min() < 0 or indices.max() >= n:
            bad = int(indices.max()) if indices.max() >= n else int(indices.min())
            raise ReaderError(f"{self._name(shard)}: row {bad} out of range ({n} live rows)")
        uniq, inv = np.unique(indices, return_inverse=True)
        frag = self._handle(shard)
        try:
            table = frag.take(uniq, columns=self.columns)
        except BaseException as exc:  # also Rust panics: see _library_fault
            _library_fault(exc)
            rows = (
                f"row {int(uniq[0])}" if len(uniq) == 1 else f"rows {int(uniq[0])}-{int(uniq[-1])} ({len(uniq)} rows)"
            )
            raise ReaderError(f"{self._name(shard)}: cannot be read ({rows}: {_message(exc)})") from None
        if table.num_rows != len(uniq):
            raise ReaderError(f"{self._name(shard)}: asked for {len(uniq)} rows, got {table.num_rows}")
        if self.columns is not None:
            table = table.select(self.columns)
        return in_request_order(table.to_pylist(), inv, len(indices))

    def close(self) -> None:
        """Drop the opened dataset and fragment handles (reopened on the next read)."""
        with self._lock:
            self._ds = None
            self._handles = {}
