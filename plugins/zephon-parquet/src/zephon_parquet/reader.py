"""``ParquetReader``: Parquet files as shards, read a row group at a time through a decoded cache.

Reading one row of a Parquet file means decoding (at least) one page of every column, so naive
random per-row reads cost 0.3-1.4 ms each. The fetch stage hands a reader all of a chunk's pointers
into one shard at once, and Zephon's block shuffle keeps those pointers within one or two row
groups; so ``read`` groups indices by row group, decodes each needed row group once (only the
selected columns) and keeps decoded row groups in a byte-bounded LRU. A pointer is
``(file, row)``; rows map to ``(row group, offset)`` through the footer's row counts, so listing a
dataset reads footers only, never data.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from zephon_storage import ByteLRU, FileReader, describe_error, parse_bytes

from zephon_core import ReaderError, RecordError, ShardInfo
from zephon_parquet.detect import FILES

DEFAULT_ROW_GROUP_CACHE = 256 * 1024**2
FOOTER_READS = 16
"""Remote footers read at once when a dataset without a manifest is listed."""


class ParquetReader(FileReader):
    """Reads a folder (or one file) of Parquet files; each row is one sample.

    Args:
        path: local path or fsspec URL of a folder or a single ``.parquet`` file.
        columns: read only these columns (fewer columns decode faster); each must exist in
            every file.
        row_group_cache_bytes: budget of the decoded row-group LRU, per reader and process.
        verify_checksums: verify page CRCs when the writer stored them
            (``write_page_checksum=True``); free when it did not. Most writers do not: then
            ``verify="checksum"`` (a storage-level option, below) checks each file's SHA-256 from
            ``zephon index --checksum`` instead.
        prefetch: after opening shard ``s`` of a remote dataset, warm the cache with the next
            ``prefetch`` shards.
        open_files: most Parquet files kept open at once per reader.
        manifest: hold the listing to ``_zephon_manifest.json`` when ``zephon index`` wrote one
            (a missing, extra or resized file is then an error).
        **storage: :class:`zephon_storage.Storage` options (``storage_options``, ``cache_dir``,
            ``cache_bytes``, ``retries``, …), ``verify``, ``on_error`` and ``max_bad_fraction``
            (see :class:`~zephon_storage.StorageReader`: a row group that does not decode is
            skippable, its rows are all skipped); any other name is a ``ConfigError``.
    """

    format = "parquet"
    data_files = FILES
    _RUNTIME = ("_cache", "_undecodable")

    def __init__(
        self,
        path: str,
        *,
        columns: Sequence[str] | None = None,
        row_group_cache_bytes: int | str = DEFAULT_ROW_GROUP_CACHE,
        verify_checksums: bool = True,
        prefetch: int = 0,
        open_files: int = 16,
        manifest: bool = True,
        **storage: Any,
    ) -> None:
        super().__init__(path, prefetch=prefetch, open_files=open_files, manifest=manifest, storage=storage)
        self.columns = self._names(columns, "columns")
        self.row_group_cache_bytes = parse_bytes(row_group_cache_bytes)
        self.verify_checksums = bool(verify_checksums)
        self._offsets: list[np.ndarray] | None = None
        self._init_runtime()

    def _init_runtime(self) -> None:
        super()._init_runtime()
        self._cache = ByteLRU(self.row_group_cache_bytes)
        # Row groups that failed to decode, with the error: skipping their rows one by one
        # (on_error="skip", zephon index --validate) must not decode the group again per row.
        self._undecodable: dict[tuple[int, int], str] = {}

    # -- listing ------------------------------------------------------------------------------------
    def _footer(self, i: int) -> pq.FileMetaData:
        info, name = self.files()[i], self._name(i)
        try:
            if self.storage.is_local:
                return pq.read_metadata(self.storage.full_path(info.rel))
            with self.storage.open_remote(info.rel) as f:
                return pq.ParquetFile(f).metadata
        except ReaderError:
            raise
        except Exception as exc:
            raise ReaderError(f"{name}: not a readable Parquet file ({describe_error(exc)})") from None

    def _check_columns(self, i: int, names: list[str]) -> None:
        if self.columns is None:
            return
        missing = [c for c in self.columns if c not in names]
        if missing:
            raise ReaderError(f"{self._name(i)}: has no column(s) {missing} (columns: {names})")

    def row_group_offsets(self, i: int) -> np.ndarray:
        """Row offsets of shard ``i``'s row groups: ``[0, n0, n0+n1, …, num_rows]``."""
        if self._offsets is None:
            files = self.files()
            listed: dict[int, list[int]] = {}
            for k, info in enumerate(files):
                entry = self._manifest.get(info.rel) if self._manifest else None
                if entry is not None and "row_groups" in entry.extra and self.columns is None:
                    listed[k] = [int(n) for n in entry.extra["row_groups"]]  # no footer read at listing time
            unread = [k for k in range(len(files)) if k not in listed]
            for k, rows in zip(unread, self._footer_rows(unread)):
                listed[k] = rows
            self._offsets = [
                np.concatenate([[0], np.cumsum(listed[k], dtype=np.int64)]).astype(np.int64) for k in range(len(files))
            ]
        return self._offsets[i]

    def _footer_rows(self, shards: list[int]) -> list[list[int]]:
        """Row-group sizes of these shards, from their footers (checked against ``columns``).

        A remote footer costs a round trip or two; read one by one, a few hundred files at a
        distant store keep the first batch waiting for seconds. So remote footers are read
        :data:`FOOTER_READS` at a time; results (and the first error, in shard order) are the same.
        """

        def rows_of(k: int) -> list[int]:
            meta = self._footer(k)
            self._check_columns(k, meta.schema.to_arrow_schema().names)
            return [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]

        if self.storage.is_local or len(shards) < 2:
            return [rows_of(k) for k in shards]
        with ThreadPoolExecutor(min(FOOTER_READS, len(shards)), thread_name_prefix="zephon-footers") as pool:
            return list(pool.map(rows_of, shards))

    def shards(self) -> list[ShardInfo]:
        """One shard per file; row counts come from the footers (no data is read)."""
        return self._held_to_manifest(
            [ShardInfo(f.rel, int(self.row_group_offsets(i)[-1])) for i, f in enumerate(self.files())]
        )

    def _manifest_extra(self, i: int) -> dict[str, Any]:
        """Row-group sizes, so listing a remote dataset with a manifest needs no footer reads."""
        return {"row_groups": np.diff(self.row_group_offsets(i)).tolist()}

    def describe(self) -> dict[str, Any]:
        return {"format": self.format, "columns": self.columns}

    # -- files --------------------------------------------------------------------------------------
    def _open_file(self, i: int) -> tuple[tuple[pq.ParquetFile, threading.Lock], Callable[[], None]]:
        """The file checked against the listing, with a lock of its own (a ParquetFile is not thread-safe)."""
        name = self._name(i)
        local = self._local(i)
        try:
            pf = pq.ParquetFile(local.path, memory_map=False, page_checksum_verification=self.verify_checksums)
        except Exception as exc:
            local.release()
            raise ReaderError(f"{name}: not a readable Parquet file ({describe_error(exc)})") from None
        rows = [pf.metadata.row_group(g).num_rows for g in range(pf.metadata.num_row_groups)]
        expected = np.diff(self.row_group_offsets(i)).tolist()
        if rows != expected:
            local.release()
            raise ReaderError(
                f"{name}: row groups {rows[:8]} disagree with the listing {expected[:8]}: "
                "the file changed after the dataset was opened"
            )
        try:
            self._check_columns(i, pf.schema_arrow.names)
        except ReaderError:
            local.release()
            raise
        return (pf, threading.Lock()), local.release

    def _row_group(self, i: int, g: int) -> pa.Table:
        key = (i, g)
        table = self._cache.get(key)
        if table is not None:
            return table
        failed = self._undecodable.get(key)
        if failed is not None:
            raise RecordError(failed)
        pf, lock = self._opened(i)
        try:
            with lock:
                table = pf.read_row_group(g, columns=self.columns, use_threads=False)
        except Exception as exc:
            offsets = self.row_group_offsets(i)
            rows = f"rows {int(offsets[g])}-{int(offsets[g + 1]) - 1}"
            message = f"{self._name(i)}: row group {g} cannot be decoded ({rows}: {describe_error(exc)})"
            self._undecodable[key] = message
            raise RecordError(message) from None
        expected = int(self.row_group_offsets(i)[g + 1] - self.row_group_offsets(i)[g])
        if table.num_rows != expected:
            raise ReaderError(f"{self._name(i)}: row group {g} has {table.num_rows} rows, footer says {expected}")
        self._cache.put(key, table, table.nbytes)
        return table

    # -- reading ------------------------------------------------------------------------------------
    def read(self, shard: int, indices: np.ndarray) -> list[dict[str, Any]]:
        """Rows ``indices`` of file ``shard``: each needed row group decoded once, then ``take``."""
        self._check_shard(shard)
        indices = np.asarray(indices, dtype=np.int64)
        if len(indices) == 0:
            return []
        offsets = self.row_group_offsets(shard)
        if indices.min() < 0 or indices.max() >= offsets[-1]:
            raise ReaderError(f"{self._name(shard)}: row {int(indices.max())} out of range ({offsets[-1]} rows)")
        groups = np.searchsorted(offsets, indices, side="right") - 1
        out: list[Any] = [None] * len(indices)
        for g in np.unique(groups).tolist():
            pos = np.flatnonzero(groups == g)
            table = self._row_group(shard, g)
            try:
                rows = table.take(pa.array(indices[pos] - offsets[g])).to_pylist()
            except Exception as exc:  # e.g. invalid UTF-8 in a string column
                first = int(indices[pos][0])
                raise RecordError(
                    f"{self._name(shard)}: row {first} (row group {g}) cannot be converted ({describe_error(exc)})"
                ) from None
            for p, row in zip(pos.tolist(), rows):
                out[p] = row
        return out

    def close(self) -> None:
        super().close()
        self._cache.clear()
        self._undecodable.clear()
