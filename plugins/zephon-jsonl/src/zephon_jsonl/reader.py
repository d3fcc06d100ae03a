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
import threading
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any

import numpy as np

from zephon_core import ConfigError, ReaderError, RecordError, ShardInfo
from zephon_core.storage import (
    FileInfo,
    FileReader,
    LocalFile,
    ManifestEntry,
    cache_key,
    call_with_retry,
    check_listing,
    in_request_order,
    read_manifest,
)
from zephon_jsonl import zidx
from zephon_jsonl.compression import decompress
from zephon_jsonl.detect import FILES, compression_of

_RAW_DECODE = json.JSONDecoder().raw_decode
"""``json.loads`` minus its per-call encoding detection and whitespace regexes (hot path)."""


class JsonlReader(FileReader):
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
        **storage: :class:`zephon_core.storage.Storage` options (``storage_options``, ``cache_dir``,
            ``cache_bytes``, ``retries``, …), ``on_error`` and ``max_bad_fraction`` (see
            :class:`~zephon_core.storage.StorageReader`: a line that is not a JSON object, or whose
            CRC is wrong, is a skippable record); any other name is a ``ConfigError``.
    """

    format = "jsonl"
    data_files = FILES
    _RUNTIME = ("_indexes",)

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
        names = self._names(fields, "fields")
        self.fields = tuple(names) if names is not None else None
        self.verify = bool(verify)
        self.rebuild_stale = bool(rebuild_stale)
        self.index_dir = index_dir
        self._remote_indexes: set[str] = set()
        self.built_indexes = 0
        self._init_runtime()

    def _init_runtime(self) -> None:
        super()._init_runtime()
        self._indexes: dict[int, zidx.LineIndex] = {}

    # -- listing ------------------------------------------------------------------------------------
    def _list_files(self) -> tuple[list[FileInfo], dict[str, ManifestEntry] | None]:
        """The data files; ``.zidx`` files listed beside them are remembered (and must have their data file)."""
        listed = self.storage.list_files(lambda rel: FILES.accepts(rel) or rel.endswith(zidx.SUFFIX))
        names = {f.rel for f in listed}
        files = [f for f in listed if FILES.accepts(f.rel)]
        self._remote_indexes = {n for n in names if n.endswith(zidx.SUFFIX)}
        if not files:
            raise ReaderError(f"{self.path}: no {FILES.what} found")
        data = {f.rel for f in files}
        orphans = sorted(n[: -len(zidx.SUFFIX)] for n in self._remote_indexes if n[: -len(zidx.SUFFIX)] not in data)
        if orphans and not self.storage.is_single_file:
            raise ReaderError(
                f"{self.storage.url_of(orphans[0])}: missing, but its index {orphans[0]}{zidx.SUFFIX} is there "
                "(the file was deleted or renamed; delete the index too if that was on purpose)"
            )
        manifest = read_manifest(self.storage, self.format) if self.use_manifest else None
        if manifest is not None:
            check_listing(self.storage, files, manifest)
        return files, manifest

    def shards(self) -> list[ShardInfo]:
        """One shard per file, with the record count from its index (built here if missing)."""
        return self._held_to_manifest([ShardInfo(f.rel, len(self._index(i))) for i, f in enumerate(self.files())])

    def describe(self) -> dict[str, Any]:
        return {"format": self.format, "fields": list(self.fields) if self.fields else None}

    # -- indexes ------------------------------------------------------------------------------------
    def _index_paths(self, info: FileInfo) -> list[str]:
        key = cache_key(self.storage.url_of(info.rel), name=info.rel) + zidx.SUFFIX
        if self.index_dir:
            return [os.path.join(self.index_dir, key)]
        cached = os.path.join(self.storage.cache_dir, "index", key)
        if self.storage.is_local:
            return [self.storage.full_path(info.rel) + zidx.SUFFIX, cached]
        return [cached]

    def _fresh(self, built: zidx.Identity, info: FileInfo) -> bool:
        """Whether an index built for ``built`` fits the file as listed now.

        Same size and version is enough. Otherwise (a copy with a new mtime, an index built
        locally and uploaded beside remote objects) the first and last 64 KiB must match.
        """
        if built.matches(zidx.Identity(info.size, info.version)):
            return True
        if built.size != info.size or built.head_crc is None:
            return False
        if self.storage.is_local:
            return built.matches(zidx.local_identity(self.storage.full_path(info.rel)))
        return built.matches(self._remote_identity(info))

    def _remote_identity(self, info: FileInfo) -> zidx.Identity:
        def probe() -> tuple[bytes, bytes]:
            with self.storage.fs.open(self.storage.full_path(info.rel), "rb") as f:
                head = f.read(zidx.PROBE)
                f.seek(max(0, info.size - zidx.PROBE))
                return head, f.read(zidx.PROBE)

        url = self.storage.url_of(info.rel)
        head, tail = call_with_retry(probe, what=url, attempts=self.storage.retries, base_delay=self.storage.backoff)
        return zidx.Identity(info.size, info.version, zlib.crc32(head), zlib.crc32(tail))

    def _index(self, i: int) -> zidx.LineIndex:
        idx = self._indexes.get(i)
        if idx is not None:
            return idx
        with self._lock:
            idx = self._indexes.get(i)
            if idx is None:
                idx = self._indexes[i] = self._load_or_build(i)
        return idx

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

    def _data_path(self, info: FileInfo) -> str | None:
        """The local path of a data file, whose permission bits its index copies (None when remote)."""
        return self.storage.full_path(info.rel) if self.storage.is_local else None

    def _load_or_build(self, i: int) -> zidx.LineIndex:
        info, name = self.files()[i], self._name(i)
        paths = self._index_paths(info)
        if not self.storage.is_local and not os.path.exists(paths[0]):
            self._download_index(info, paths[0])
        stale = None
        for p in paths:
            if os.path.exists(p):
                idx = zidx.read(p, name)
                if self._fresh(idx.source, info):
                    if idx.source.version != info.version:
                        idx = self._adopt(p, idx, info)
                    return idx
                stale = (p, idx.source)
        if stale is not None and not self.rebuild_stale:
            p, src = stale
            raise ReaderError(
                f"{name}: index {p} is stale (built for a file of {src.size} bytes, version {src.version}; "
                f"the file now has {info.size} bytes, version {info.version}). Rebuild it with "
                f"`zephon index {self.path}`, delete it, or pass rebuild_stale=True"
            )
        return self._build(i, paths)

    def _adopt(self, path: str, idx: zidx.LineIndex, info: FileInfo) -> zidx.LineIndex:
        """Record the file's current version in a content-checked index, so the check runs once."""
        src = idx.source
        updated = zidx.LineIndex(
            np.array(idx.starts),
            np.array(idx.lengths),
            np.array(idx.crcs),
            zidx.Identity(info.size, info.version, src.head_crc, src.tail_crc),
            idx.compression,
            idx.data_size,
        )
        try:
            zidx.write(path, updated, like=self._data_path(info))
        except OSError:
            return idx  # read-only location: keep checking contents next time
        return zidx.read(path, self._name(self.files().index(info)))

    def _download_index(self, info: FileInfo, dest: str) -> None:
        remote = info.rel + zidx.SUFFIX
        if remote not in self._remote_indexes:
            return
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        tmp = f"{dest}.part-{os.getpid()}-{threading.get_ident()}"
        call_with_retry(
            lambda: self.storage.fs.get_file(self.storage.full_path(remote), tmp),
            what=self.storage.url_of(remote),
            attempts=self.storage.retries,
            base_delay=self.storage.backoff,
        )
        os.replace(tmp, dest)

    def _build(self, i: int, paths: list[str]) -> zidx.LineIndex:
        info, name = self.files()[i], self._name(i)
        comp = compression_of(info.rel) or "none"
        data = self._data_file(i, None, comp)
        try:
            starts, lengths, crcs, size = zidx.scan(data.path, name)
        except OSError as exc:
            raise ReaderError(f"{name}: cannot scan: {exc}") from None
        finally:
            data.release()
        ident = zidx.Identity(info.size, info.version)
        if self.storage.is_local:
            full = zidx.local_identity(self.storage.full_path(info.rel))
            if full.size != info.size:
                raise ReaderError(f"{name}: the file changed while it was being indexed")
            ident = zidx.Identity(info.size, info.version, full.head_crc, full.tail_crc)
        idx = zidx.LineIndex(starts, lengths, crcs, ident, comp, size)
        for p in paths:
            folder = os.path.dirname(os.path.abspath(p))
            try:
                zidx.write(p, idx, like=self._data_path(info))
            except OSError:
                if not os.access(folder, os.W_OK):
                    continue  # read-only data folder: fall back to the cache directory
                raise
            with self._lock:  # zephon index builds several files' indexes at once
                self.built_indexes += 1
            return zidx.read(p, name)
        raise ReaderError(f"{name}: no writable place for its index (tried {paths}); pass index_dir=")

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
        data = self._data_file(i, idx, idx.compression)
        try:
            fd = os.open(data.path, os.O_RDONLY)
        except OSError as exc:
            data.release()
            raise ReaderError(f"{self._name(i)}: cannot open: {exc}") from None
        size = os.fstat(fd).st_size
        if size != idx.data_size:
            os.close(fd)
            data.release()
            raise ReaderError(
                f"{self._name(i)}: has {size} bytes but its index was built for {idx.data_size}: "
                "the file changed or was truncated after indexing"
            )

        def release() -> None:
            os.close(fd)
            data.release()

        return fd, release

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
