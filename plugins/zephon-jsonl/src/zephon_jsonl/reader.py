"""``JsonlReader``: JSON Lines shards (one file each) read by byte offset, one ``pread`` per sample.

Each file gets a :mod:`~zephon_jsonl.zidx` index built once and kept beside the data (``<file>.zidx``)
when that folder is writable, else in ``<cache_dir>/index/``. For remote data an index uploaded
beside the objects (``zephon index s3://…``) is downloaded instead of rebuilt. Compressed files
(``.gz``, ``.zst``) are decompressed once per node into the shard cache and indexed by their
uncompressed offsets, because compressed streams cannot be read at random offsets.
"""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any

import numpy as np
from zephon_storage import (
    FileInfo,
    IndexedFileReader,
    LocalFile,
    ManifestEntry,
    SourceIdentity,
    call_with_retry,
    check_listing,
    in_request_order,
    local_identity,
    read_manifest,
)

from zephon_core import ConfigError, ReaderError, RecordError, ShardInfo
from zephon_jsonl import zidx
from zephon_jsonl.compression import decompress
from zephon_jsonl.detect import FILES, compression_of

_RAW_DECODE = json.JSONDecoder().raw_decode
"""``json.loads`` minus its per-call encoding detection and whitespace regexes (hot path)."""


class JsonlReader(IndexedFileReader[zidx.LineIndex]):
    """Reads a folder (or one file) of JSON Lines files; each line is one sample (a JSON object).

    Args:
        path: local path or fsspec URL of a folder or a single file.
        fields: keep only these keys of each record; a record without one of them is an error.
        verify: True: check each record's CRC32 against the index (catches corrupt bytes and an
            index that disagrees with the data; costs about a microsecond per kilobyte).
            ``"checksum"``: that, and each file's SHA-256 from the manifest when it is first used
            (``zephon index --checksum``). False: neither.
        rebuild_stale: rebuild an index whose data file changed instead of raising an error.
        index_dir: keep indexes here instead of beside the data / in the cache directory.
        prefetch: after reading shard ``s``, warm the cache with the next ``prefetch`` shards.
        open_files: most data files kept open at once per reader.
        manifest: hold the listing to ``_zephon_manifest.json`` when ``zephon index`` wrote one.
        **storage: :class:`zephon_storage.Storage` options (``storage_options``, ``cache_dir``,
            ``cache_bytes``, ``retries``, …), ``on_error`` and ``max_bad_fraction`` (see
            :class:`~zephon_storage.StorageReader`: a line that is not a JSON object, or whose
            CRC is wrong, is a skippable record); any other name is a ``ConfigError``.
    """

    format = "jsonl"
    data_files = FILES
    index_suffix = zidx.SUFFIX

    def __init__(
        self,
        path: str,
        *,
        fields: Sequence[str] | None = None,
        verify: bool | str = True,
        rebuild_stale: bool = False,
        index_dir: str | None = None,
        prefetch: int = 0,
        open_files: int = 64,
        manifest: bool = True,
        **storage: Any,
    ) -> None:
        if verify not in (True, False, None, "checksum"):
            raise ConfigError(f"jsonl reader: verify must be True, False or 'checksum', got {verify!r}")
        if verify == "checksum":
            storage = {**storage, "verify": "checksum"}
        super().__init__(path, prefetch=prefetch, open_files=open_files, manifest=manifest, storage=storage)
        self._init_indexes(rebuild_stale=rebuild_stale, index_dir=index_dir)
        names = self._names(fields, "fields")
        self.fields = tuple(names) if names is not None else None
        self.verify = bool(verify)
        self._init_runtime()

    # -- listing ------------------------------------------------------------------------------------
    def _list_files(self) -> tuple[list[FileInfo], dict[str, ManifestEntry] | None]:
        """The data files; ``.zidx`` files listed beside them are remembered (and must have their data file)."""
        listed = self.storage.list_files(lambda rel: FILES.accepts(rel) or rel.endswith(zidx.SUFFIX))
        names = {f.rel for f in listed}
        files = [f for f in listed if FILES.accepts(f.rel)]
        self._remote_indexes = {n for n in names if n.endswith(zidx.SUFFIX)}
        if not files:
            raise ReaderError(f"{self.path}: no {FILES.what} found")
        self._check_orphan_indexes({f.rel for f in files})
        manifest = read_manifest(self.storage, self.format) if self.use_manifest else None
        if manifest is not None:
            check_listing(self.storage, files, manifest)
        return files, manifest

    def shards(self) -> list[ShardInfo]:
        """One shard per file, with the record count from its index (built here if missing)."""
        return self._held_to_manifest([ShardInfo(f.rel, len(self._index(i))) for i, f in enumerate(self.files())])

    def describe(self) -> dict[str, Any]:
        return {"format": self.format, "fields": list(self.fields) if self.fields else None}

    # -- indexes (found, checked, adopted and saved by IndexedFileReader) ---------------------------
    def build_indexes(self, jobs: int = 1, progress: Callable[[int, int], None] | None = None) -> None:
        """Load or build every file's index, ``jobs`` files at a time (what ``zephon index`` runs).

        Scanning a file is reading it and a CRC per line, which releases the GIL for most of its
        time, so threads suffice. Each index depends only on its own data file, so the files written
        are the same whatever ``jobs`` is. It bypasses :meth:`_index`, which holds the reader's lock
        for a whole build (reads must never see half-built state), and would run one file at a time.

        Args:
            jobs: files indexed at once.
            progress: called as ``progress(done, total)`` after each file.
        """
        files = self.files()
        total = len(files)
        todo = [i for i in range(total) if i not in self._indexes]
        done = total - len(todo)
        if progress is not None:
            progress(done, total)

        def one(i: int) -> tuple[int, zidx.LineIndex]:
            return i, self._load_or_build(i)

        with ThreadPoolExecutor(max(1, min(jobs, len(todo))), thread_name_prefix="zephon-index") as pool:
            for future in as_completed([pool.submit(one, i) for i in todo]):
                i, idx = future.result()
                with self._lock:
                    self._indexes.setdefault(i, idx)
                done += 1
                if progress is not None:
                    progress(done, total)

    def _read_index(self, path: str, name: str) -> zidx.LineIndex:
        return zidx.read(path, name)

    def _write_index(self, path: str, idx: zidx.LineIndex, info: FileInfo) -> None:
        zidx.write(path, idx, like=self._data_path(info))

    def _with_source(self, idx: zidx.LineIndex, source: SourceIdentity) -> zidx.LineIndex:
        """A copy whose arrays live in memory, not in a map of the index file about to be replaced."""
        return zidx.LineIndex(
            np.array(idx.starts), np.array(idx.lengths), np.array(idx.crcs), source, idx.compression, idx.data_size
        )

    def _build_index(self, i: int, paths: list[str]) -> zidx.LineIndex:
        info, name = self.files()[i], self._name(i)
        comp = compression_of(info.rel) or "none"
        data = self._data_file(i, None, comp)
        try:
            starts, lengths, crcs, size = zidx.scan(data.path, name)
        except OSError as exc:
            raise ReaderError(f"{name}: cannot scan: {exc}") from None
        finally:
            data.release()
        ident = SourceIdentity(info.size, info.version)
        if self.storage.is_local:
            full = local_identity(self.storage.full_path(info.rel))
            if full.size != info.size:
                raise ReaderError(f"{name}: the file changed while it was being indexed")
            ident = SourceIdentity(info.size, info.version, full.head_crc, full.tail_crc)
        idx = zidx.LineIndex(starts, lengths, crcs, ident, comp, size)
        return self._save_index(paths, idx, info, name)

    # -- data files ---------------------------------------------------------------------------------
    def _data_file(self, i: int, idx: zidx.LineIndex | None, comp: str) -> LocalFile:
        info = self.files()[i]
        if comp == "none":
            return self._local(i)
        name = self._name(i)

        def produce(tmp: str) -> None:
            if self.content_checksums:  # decompress from the checked copy only
                src = self._local(i)
                try:
                    with open(src.path, "rb") as fin, open(tmp, "wb") as dst:
                        decompress(comp, fin, dst, name)
                finally:
                    src.release()
                return

            def once() -> None:
                src = open(self.storage.full_path(info.rel), "rb") if self.storage.is_local else None
                src = src or self.storage.fs.open(self.storage.full_path(info.rel), "rb")
                with src, open(tmp, "wb") as dst:
                    decompress(comp, src, dst, name)

            call_with_retry(once, what=name, attempts=self.storage.retries, base_delay=self.storage.backoff)

        key = self.storage.key_of(info, "decompressed", *(("checked",) if self.content_checksums else ()))
        entry = self.storage.materialize(
            key, produce, what=name, expected_size=idx.data_size if idx is not None else None
        )
        return LocalFile(entry.path, info, entry)

    def _open_file(self, i: int) -> tuple[int, Callable[[], None]]:
        """A descriptor of the (decompressed) data, checked against the size its index was built for."""
        idx = self._index(i)
        return self._open_indexed(i, self._data_file(i, idx, idx.compression), idx.data_size)

    def _prefetchable(self, rel: str) -> bool:
        """Only plain files: compressed ones are decompressed into the cache when first opened."""
        return compression_of(rel) == "none"

    # -- reading ------------------------------------------------------------------------------------
    def read(self, shard: int, indices: np.ndarray) -> list[dict[str, Any]]:
        """Records ``indices`` of file ``shard``: one ``pread``, checksum and ``json.loads`` each."""
        self._check_shard(shard)
        idx = self._index(shard)
        indices = np.asarray(indices, dtype=np.int64)
        if len(indices) == 0:
            return []
        if indices.min() < 0 or indices.max() >= len(idx):
            raise ReaderError(f"{self._name(shard)}: index {int(indices.max())} out of range ({len(idx)} records)")
        uniq, inv = np.unique(indices, return_inverse=True)
        starts, lengths, crcs = idx.starts[uniq].tolist(), idx.lengths[uniq].tolist(), idx.crcs[uniq].tolist()
        with self._lock:
            fd = self._opened(shard)
            raw = [os.pread(fd, n, s) for s, n in zip(starts, lengths)]
        records = [
            self._decode(shard, int(uniq[k]), starts[k], b, lengths[k], crcs[k]) for k, b in enumerate(raw)
        ]
        return in_request_order(records, inv, len(indices))

    def _decode(self, shard: int, rec: int, start: int, b: bytes, length: int, crc: int) -> dict[str, Any]:
        # Hot path: one call per sample, so the error text is only built when something is wrong.
        if len(b) != length:
            raise ReaderError(
                f"{self._where(shard, rec, start)}: file ends early ({len(b)} of {length} bytes): truncated"
            )
        if self.verify and zlib.crc32(b) != crc:
            raise RecordError(
                f"{self._where(shard, rec, start)}: bytes do not match the index checksum: the file is corrupt or changed"
            )
        try:
            text = b.decode("utf-8")
            obj, end = _RAW_DECODE(text)
            if end != len(text) and text[end:].strip():
                raise ValueError(f"Extra data: column {end + 1}")
        except ValueError:
            try:  # slow path: leading whitespace, or a real error with json's own message
                obj = json.loads(b)
            except ValueError as exc:
                raise RecordError(f"{self._where(shard, rec, start)}: invalid JSON ({exc})") from None
        if type(obj) is not dict:
            raise RecordError(f"{self._where(shard, rec, start)}: is a JSON {type(obj).__name__}, not an object")
        if self.fields is not None:
            try:
                obj = {f: obj[f] for f in self.fields}
            except KeyError as exc:
                raise RecordError(
                    f"{self._where(shard, rec, start)}: has no field {exc.args[0]!r} (fields: {sorted(obj)})"
                ) from None
        return obj

    def _where(self, shard: int, rec: int, start: int) -> str:
        return f"{self._name(shard)}: record {rec} (byte {start})"

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass
