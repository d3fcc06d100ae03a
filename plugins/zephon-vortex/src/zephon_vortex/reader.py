"""``VortexReader``: Vortex files as shards, read with one batched, sorted take per call.

Vortex can fetch rows by index without decoding whole files, but per-row scalar access pays the
scan machinery once per row. ``read`` therefore sorts and de-duplicates the requested indices,
issues one ``scan(indices=…)`` for the shard, converts the result to Arrow once and scatters the
rows back to the requested order (repeats included).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import vortex as vx
from zephon_storage import FileReader, describe_error, in_request_order

from zephon_core import ReaderError, RecordError, ShardInfo
from zephon_vortex.detect import FILES


def _library_fault(exc: BaseException) -> BaseException:
    """Return ``exc`` if it is a library failure; re-raise interpreter exits and interrupts.

    A Rust panic inside vortex surfaces as pyo3's ``PanicException``, which derives from
    ``BaseException`` (not ``Exception``) and is not importable, so it is recognised by name.
    """
    if isinstance(exc, Exception) or type(exc).__name__ == "PanicException":
        return exc
    raise exc


class VortexReader(FileReader):
    """Reads a folder (or one file) of Vortex files whose top-level type is a struct (one row = one sample).

    Args:
        path: local path or fsspec URL of a folder or a single ``.vortex`` file.
        columns: read only these fields; each must exist in every file.
        prefetch: after opening shard ``s`` of a remote dataset, warm the cache with the next
            ``prefetch`` shards.
        open_files: most Vortex files kept open at once per reader (each holds a segment cache).
        manifest: hold the listing to ``_zephon_manifest.json`` when ``zephon index`` wrote one.
        **storage: :class:`zephon_storage.Storage` options (``storage_options``, ``cache_dir``,
            ``cache_bytes``, ``retries``, …), ``verify`` (Vortex files carry no checksum of their
            own: ``"checksum"`` checks the SHA-256 from ``zephon index --checksum``), ``on_error``
            and ``max_bad_fraction`` (see :class:`~zephon_storage.StorageReader`); any other
            name is a ``ConfigError``.
    """

    format = "vortex"
    data_files = FILES

    def __init__(
        self,
        path: str,
        *,
        columns: Sequence[str] | None = None,
        prefetch: int = 0,
        open_files: int = 16,
        manifest: bool = True,
        **storage: Any,
    ) -> None:
        super().__init__(path, prefetch=prefetch, open_files=open_files, manifest=manifest, storage=storage)
        self.columns = self._names(columns, "columns")
        self._counts: list[int] | None = None
        self._init_runtime()

    # -- listing ------------------------------------------------------------------------------------
    def _check(self, i: int, vf: Any) -> None:
        try:
            names = vf.dtype.to_arrow_schema().names
        except BaseException as exc:  # also Rust panics: see _library_fault
            _library_fault(exc)
            raise ReaderError(
                f"{self._name(i)}: top-level type is not a struct of fields ({describe_error(exc)})"
            ) from None
        if self.columns is not None:
            missing = [c for c in self.columns if c not in names]
            if missing:
                raise ReaderError(f"{self._name(i)}: has no column(s) {missing} (columns: {names})")

    def _count(self, i: int) -> int:
        info, name = self.files()[i], self._name(i)
        try:
            if self.storage.is_local:
                vf = vx.open(self.storage.full_path(info.rel))
                self._check(i, vf)
                return len(vf)
            with self.storage.open_remote(info.rel) as f:
                vf = vx.open_readable(f)
                self._check(i, vf)
                return len(vf)
        except ReaderError:
            raise
        except BaseException as exc:  # also Rust panics: see _library_fault
            _library_fault(exc)
            raise ReaderError(f"{name}: not a readable Vortex file ({describe_error(exc)})") from None

    def shards(self) -> list[ShardInfo]:
        """One shard per file; row counts come from the footers."""
        if self._counts is None:
            files = self.files()
            m = self._manifest if self.columns is None else None
            self._counts = [m[f.rel].samples if m else self._count(i) for i, f in enumerate(files)]
            if m is None:
                self._held_to_manifest([ShardInfo(f.rel, n) for f, n in zip(files, self._counts)])
        return [ShardInfo(f.rel, n) for f, n in zip(self.files(), self._counts)]

    def describe(self) -> dict[str, Any]:
        return {"format": self.format, "columns": self.columns}

    # -- reading ------------------------------------------------------------------------------------
    def _open_file(self, i: int) -> tuple[Any, Callable[[], None]]:
        """The file checked against the listing (its row count must not have changed)."""
        name = self._name(i)
        local = self._local(i)
        try:
            vf = vx.open(local.path)
            n = len(vf)
            self._check(i, vf)
        except ReaderError:
            local.release()
            raise
        except BaseException as exc:  # also Rust panics: see _library_fault
            _library_fault(exc)
            local.release()
            raise ReaderError(f"{name}: not a readable Vortex file ({describe_error(exc)})") from None
        expected = self.shards()[i].num_samples
        if n != expected:
            local.release()
            raise ReaderError(
                f"{name}: has {n} rows but the dataset listed {expected}: the file changed after it was opened"
            )
        return vf, local.release

    def read(self, shard: int, indices: np.ndarray) -> list[dict[str, Any]]:
        """Rows ``indices`` of file ``shard`` with one sorted take, scattered back to request order."""
        self._check_shard(shard)
        indices = np.asarray(indices, dtype=np.int64)
        if len(indices) == 0:
            return []
        n = self.shards()[shard].num_samples
        if indices.min() < 0 or indices.max() >= n:
            raise ReaderError(f"{self._name(shard)}: row {int(indices.max())} out of range ({n} rows)")
        uniq, inv = np.unique(indices, return_inverse=True)
        vf = self._opened(shard)
        try:
            taken = vf.scan(self.columns, indices=vx.array(pa.array(uniq.astype(np.uint64)))).read_all()
            table = taken.to_arrow_table()
        except BaseException as exc:  # also Rust panics: see _library_fault
            _library_fault(exc)
            rows = f"row {int(uniq[0])}" if len(uniq) == 1 else f"rows {int(uniq[0])}-{int(uniq[-1])} ({len(uniq)} rows)"
            raise RecordError(f"{self._name(shard)}: rows cannot be decoded ({rows}: {describe_error(exc)})") from None
        if table.num_rows != len(uniq):
            raise ReaderError(f"{self._name(shard)}: asked for {len(uniq)} rows, got {table.num_rows}")
        return in_request_order(table.to_pylist(), inv, len(indices))
