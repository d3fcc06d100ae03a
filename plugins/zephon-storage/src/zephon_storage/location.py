"""``Storage``: one dataset root on any fsspec file system, and local access to its files.

Format libraries (pyarrow, vortex, ``os.pread``) are fastest on a local file, so readers ask
:meth:`Storage.open_local` for a path: a local dataset is used in place; a remote one (``s3://``,
``gs://``, ``memory://``, …) is downloaded once per node into the shared :class:`ShardCache` and
read from there. A ``Storage`` pickles to its configuration only, so a reader holding one can be
sent to worker processes, which reconnect lazily.

Every remote call goes through one :class:`~zephon_storage.retry.RetryPolicy` (retries with
backoff, a per-read timeout, a deadline per call). Remote bytes are only ever read as stateless
range requests (``fs.cat_file(path, start, end)``) of at most :data:`READ_BLOCK` bytes: a download
that fails half-way repeats only the block that failed, and an attempt abandoned because it stalled
shares no file object or position with the retry that replaces it.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, TypeVar, runtime_checkable

from zephon_core import ReaderError
from zephon_storage.cache import CachedFile, ShardCache, cache_key
from zephon_storage.config import default_cache_bytes, default_cache_dir, parse_bytes
from zephon_storage.retry import RetryPolicy, TruncatedReadError, describe_error

T = TypeVar("T")

READ_BLOCK = 16 * 1024 * 1024
"""Largest single range request. Each must finish within ``read_timeout`` (16 MiB in 60 s is
~280 KB/s), and a failed one costs at most this much to repeat."""

_MIN_REMOTE_READ = 64 * 1024
"""Smallest request :class:`RemoteFile` makes: footer parsers issue many tiny reads near each other."""


@dataclass(frozen=True, slots=True)
class FileInfo:
    """A file under the root: ``rel`` path, ``size`` in bytes and a ``version`` that changes with it."""

    rel: str
    size: int
    version: str


@dataclass
class LocalFile:
    """A local path for a dataset file; :meth:`release` unpins a cached copy (no-op for local data)."""

    path: str
    info: FileInfo
    _entry: CachedFile | None = None

    def release(self) -> None:
        if self._entry is not None:
            self._entry.release()
            self._entry = None


def _version(info: dict[str, Any]) -> str:
    for k in ("ETag", "etag", "md5Hash", "generation", "mtime", "LastModified", "last_modified", "created"):
        v = info.get(k)
        if v is not None:
            # Listing and stat of one object may give the time as a datetime or a float: normalise.
            return repr(v.timestamp()) if isinstance(v, datetime) else str(v)
    return ""


class Storage:
    """A dataset root (folder or single file) reachable through fsspec.

    Args:
        url: local path, ``file://``, ``memory://``, ``s3://bucket/prefix`` or any fsspec URL.
        storage_options: passed to the fsspec file system (e.g. ``{"client_kwargs":
            {"endpoint_url": ...}}`` for an S3-compatible server).
        cache_dir: node-local directory for remote copies; default :func:`default_cache_dir`.
        cache_bytes: byte limit of the shard cache (int or ``"200GB"``); default
            :func:`default_cache_bytes`.
        retries: attempts per storage call before a transient fault becomes an error.
        backoff: first retry delay in seconds (doubles per attempt).
        read_timeout: longest wait, in seconds, for one read (a metadata request or one range of at
            most :data:`READ_BLOCK` bytes) before it is abandoned and retried; None: no guard. For
            ``s3://`` it is also the client's socket read timeout (no byte for that long), unless
            ``storage_options["config_kwargs"]`` sets one.
        deadline: longest time, in seconds, one storage call may take over all its retries before
            it is a ``ReaderError`` naming the URL; None: only ``retries`` bounds it.
        prefetch_workers: threads that warm the cache in the background (downloads in flight at once:
            each waits mostly on the store, so several hide its latency).
        lock_timeout: longest wait for another process downloading the same shard.
    """

    def __init__(
        self,
        url: str,
        *,
        storage_options: dict[str, Any] | None = None,
        cache_dir: str | None = None,
        cache_bytes: int | str | None = None,
        retries: int = 5,
        backoff: float = 0.2,
        read_timeout: float | None = 60.0,
        deadline: float | None = 300.0,
        prefetch_workers: int = 4,
        lock_timeout: float = 900.0,
    ) -> None:
        if not isinstance(url, str) or not url:
            raise ReaderError(f"dataset path must be a non-empty string, got {url!r}")
        self.url = url
        self.storage_options = dict(storage_options or {})
        self.cache_dir = os.path.abspath(os.path.expanduser(cache_dir)) if cache_dir else default_cache_dir()
        self.cache_bytes = parse_bytes(cache_bytes) if cache_bytes is not None else default_cache_bytes()
        self.retries = int(retries)
        self.backoff = float(backoff)
        self.read_timeout = _positive_or_none(read_timeout, "read_timeout")
        self.deadline = _positive_or_none(deadline, "deadline")
        self.prefetch_workers = max(1, int(prefetch_workers))
        self.lock_timeout = float(lock_timeout)
        self._init_runtime()
        self.fs  # noqa: B018 - resolve the protocol now so a bad URL fails at construction

    def _init_runtime(self) -> None:
        self._fs: Any = None
        self._root: str = ""
        self._base: str | None = None
        self._single: str | None = None
        self._cache: ShardCache | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._pending: dict[str, Future[Any]] = {}
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        keep: tuple[str, ...] = ("url", "storage_options", "cache_dir", "cache_bytes", "retries", "backoff")
        keep += ("read_timeout", "deadline", "prefetch_workers", "lock_timeout")
        return {k: self.__dict__[k] for k in keep} | {"_base": self._base, "_single": self._single}

    def __setstate__(self, state: dict[str, Any]) -> None:
        base, single = state.pop("_base"), state.pop("_single")
        self.__dict__.update(state)
        self._init_runtime()
        self._base, self._single = base, single

    # -- the file system ------------------------------------------------------------------------
    @property
    def fs(self) -> Any:
        """The fsspec file system (created lazily, also after unpickling)."""
        if self._fs is None:
            import fsspec

            try:
                self._fs, self._root = fsspec.core.url_to_fs(self.url, **self._client_options())
            except Exception as exc:
                raise ReaderError(f"cannot open {self.url!r}: {describe_error(exc)}") from exc
        return self._fs

    def _client_options(self) -> dict[str, Any]:
        """The fsspec options, with :attr:`read_timeout` as the S3 client's socket timeout when unset.

        The client's timeout ends a stalled request on its own (no byte for that long), so an
        attempt abandoned by :attr:`read_timeout` does not leave its thread waiting forever.
        """
        import fsspec

        options = dict(self.storage_options)
        protocol = fsspec.core.split_protocol(self.url)[0]
        if self.read_timeout is not None and protocol in ("s3", "s3a"):
            config = dict(options.get("config_kwargs") or {})
            config.setdefault("read_timeout", self.read_timeout)
            options["config_kwargs"] = config
        return options

    @property
    def policy(self) -> RetryPolicy:
        """How this root retries (from ``retries``, ``backoff``, ``read_timeout``, ``deadline``)."""
        return RetryPolicy(self.retries, self.backoff, self.read_timeout, self.deadline)

    def call(self, fn: Callable[[], T], what: str, *, per_read: bool = True) -> T:
        """``fn()`` (one storage request about ``what``, a URL) with this root's retries and timeouts.

        For readers that make their own requests through :attr:`fs`: they then survive the same
        faults, and fail with the same ``ReaderError`` naming the URL, as Zephon's own reads.
        ``fn`` must be safe to run again (see :func:`~zephon_storage.retry.call_with_retry`).
        """
        return self.policy.call(fn, what, per_read=per_read)

    @property
    def is_local(self) -> bool:
        """True when files can be read in place (no cache copy needed)."""
        from fsspec.implementations.local import LocalFileSystem

        return isinstance(self.fs, LocalFileSystem)

    @property
    def cache(self) -> ShardCache:
        """The node-local shard cache (``<cache_dir>/shards``)."""
        if self._cache is None:
            self._cache = ShardCache(os.path.join(self.cache_dir, "shards"), self.cache_bytes, self.lock_timeout)
        return self._cache

    def _retry(self, fn: Callable[[], T], what: str, *, per_read: bool = True) -> T:
        return self.policy.call(fn, what, per_read=per_read)

    def read_bytes(self, rel: str) -> bytes:
        """The whole content of a small file (an index, a manifest), read with retries."""
        info = self.info(rel)
        return self.read_range(info.rel, 0, info.size, info)

    def read_range(self, rel: str, start: int, end: int, info: FileInfo | None = None) -> bytes:
        """Bytes ``[start, end)`` of ``rel``: range requests of at most :data:`READ_BLOCK`, each retried.

        A short answer (a truncated body the client did not notice) is a transient fault and the
        block is asked for again, unless the object changed since ``info`` was taken: pointers
        computed from the old object would then address other samples, so that is a ``ReaderError``.
        """
        path, url = self.full_path(rel), self.url_of(rel)
        parts: list[bytes] = []
        pos = start
        while pos < end:
            stop = min(end, pos + READ_BLOCK)
            parts.append(self._retry(functools.partial(self._read_block, path, url, rel, pos, stop, info), url))
            pos = stop
        return b"".join(parts)

    def _read_block(self, path: str, url: str, rel: str, start: int, end: int, info: FileInfo | None) -> bytes:
        data: bytes = self.fs.cat_file(path, start=start, end=end)
        if len(data) == end - start:
            return data
        if info is not None:
            self._check_unchanged(info, url)
        raise TruncatedReadError(f"got {len(data)} of {end - start} bytes at offset {start}")

    def _check_unchanged(self, info: FileInfo, url: str) -> None:
        """``ReaderError`` if ``info.rel`` is no longer the object that was listed (size or version)."""
        raw = self.fs.info(self.full_path(info.rel))
        size, version = int(raw.get("size") or 0), _version(raw)
        if (size, version) != (info.size, info.version):
            raise ReaderError(
                f"{url}: the object changed since the dataset was listed "
                f"(size {info.size} -> {size}, version {info.version} -> {version})"
            )

    def _resolve(self) -> str:
        """The folder that relative paths hang off; detects a single-file dataset once.

        One retried ``info`` call: ``fs.exists`` answers False for any error (a timeout included),
        which would turn a transient fault into "does not exist".
        """
        if self._base is None:
            fs, root = self.fs, self._root
            try:
                info = self._retry(lambda: fs.info(root), self.url)
            except ReaderError as exc:
                if isinstance(exc.__cause__, FileNotFoundError):
                    raise ReaderError(f"dataset path {self.url!r} does not exist") from None
                raise
            if info.get("type") == "directory":
                self._base = root.rstrip("/")
            else:
                self._base, _, self._single = root.rpartition("/")
        return self._base

    @property
    def is_single_file(self) -> bool:
        """True when the dataset root is one file rather than a folder."""
        self._resolve()
        return self._single is not None

    def full_path(self, rel: str) -> str:
        """The file system path of ``rel``."""
        base = self._resolve()
        return f"{base}/{rel}" if base else rel

    def url_of(self, rel: str) -> str:
        """A URL for messages: what a user would paste to find the file."""
        path = self.full_path(rel)
        return path if self.is_local else self.fs.unstrip_protocol(path)

    def list_files(self, accept: Callable[[str], bool]) -> list[FileInfo]:
        """Files under the root (recursively) whose relative path ``accept`` takes, sorted by path."""
        base = self._resolve()
        if self._single is not None:
            rels = [self._single] if accept(self._single) else []
            return [self.info(r) for r in rels]
        found = self._retry(lambda: self.fs.find(base, detail=True), self.url, per_read=False)
        out = []
        for name, info in found.items():
            if info.get("type", "file") != "file":
                continue
            rel = name[len(base) :].lstrip("/") if name.startswith(base) else name.rsplit("/", 1)[-1]
            if accept(rel):
                out.append(FileInfo(rel, int(info.get("size") or 0), _version(info)))
        return sorted(out, key=lambda f: f.rel)

    def info(self, rel: str) -> FileInfo:
        """Size and version of one file (one metadata request, retried)."""
        url = self.url_of(rel)
        info = self._retry(lambda: self.fs.info(self.full_path(rel)), url)
        if info.get("type", "file") != "file":
            raise ReaderError(f"{url}: is not a file")
        return FileInfo(rel, int(info.get("size") or 0), _version(info))

    def open_remote(self, rel: str, info: FileInfo | None = None) -> RemoteFile:
        """A seekable, read-only file object for footers: every read is a retried range request."""
        return RemoteFile(self, info or self.info(rel))

    # -- local access -----------------------------------------------------------------------------
    def open_local(self, rel: str, info: FileInfo | None = None) -> LocalFile:
        """A local path for ``rel``: in place for local data, else a pinned, shared cache copy."""
        if self.is_local:
            path = self.full_path(rel)
            if not os.path.isfile(path):
                raise ReaderError(f"{path}: not found")
            if info is None:
                st = os.stat(path)
                info = FileInfo(rel, st.st_size, str(st.st_mtime_ns))
            return LocalFile(path, info)
        info = info or self.info(rel)
        entry = self.cache.acquire(
            self.key_of(info), lambda tmp: self._download(info, tmp), what=self.url_of(rel), expected_size=info.size
        )
        return LocalFile(entry.path, info, entry)

    def key_of(self, info: FileInfo, *extra: object) -> str:
        """The cache key of a remote file's copy (changes when the object changes)."""
        return cache_key(self.url_of(info.rel), info.size, info.version, *extra, name=info.rel)

    def materialize(
        self, key: str, produce: Callable[[str], None], *, what: str, expected_size: int | None = None
    ) -> CachedFile:
        """A pinned cache entry made by ``produce(tmp_path)`` (e.g. a decompressed copy)."""
        return self.cache.acquire(key, produce, what=what, expected_size=expected_size)

    def _download(self, info: FileInfo, tmp: str) -> None:
        """Copy ``info.rel`` to ``tmp`` block by block; an object that changed since it was listed is an error.

        Pointers were computed from the listed object, so silently reading a newer version of it
        would hand out the wrong samples. Each block is its own retried request, so a fault costs
        one block, and the writes happen here, never on an abandoned attempt's thread.
        """
        with open(tmp, "wb") as fout:
            pos = 0
            while pos < info.size:
                stop = min(info.size, pos + READ_BLOCK)
                fout.write(self.read_range(info.rel, pos, stop, info))
                pos = stop

    # -- prefetching ------------------------------------------------------------------------------
    def prefetch(self, files: Iterable[str | FileInfo]) -> list[Future[Any]]:
        """Warm the cache with these files in the background (in order); returns their futures.

        A file is named by its relative path, or given as the :class:`FileInfo` its listing
        already holds: then no metadata request precedes the download (one round trip less per
        file, which is most of the cost of a small file at a distant store). Errors are kept in
        the futures, not raised: the foreground read of the same file raises them with full
        context if they persist. For local data this asks the OS to read ahead.
        """
        futures = []
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.prefetch_workers, thread_name_prefix="zephon-prefetch")
            for item in files:
                rel, info = (item, None) if isinstance(item, str) else (item.rel, item)
                fut = self._pending.get(rel)
                if fut is None or (fut.done() and fut.exception() is not None):
                    fut = self._pool.submit(self._warm, rel, info)
                    self._pending[rel] = fut
                futures.append(fut)
        return futures

    def _warm(self, rel: str, listed: FileInfo | None = None) -> bool:
        if self.is_local:
            with contextlib.suppress(OSError, AttributeError):
                fd = os.open(self.full_path(rel), os.O_RDONLY)
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
                finally:
                    os.close(fd)
            return False
        info = listed or self.info(rel)
        return self.cache.warm(
            self.key_of(info), lambda tmp: self._download(info, tmp), what=self.url_of(rel), expected_size=info.size
        )

    def wait_prefetch(self, timeout: float | None = None) -> None:
        """Block until every prefetch submitted so far has finished (or ``timeout`` passes)."""
        with self._lock:
            futures = list(self._pending.values())
        wait_futures(futures, timeout=timeout)

    def close(self) -> None:
        """Stop the prefetch threads (pending downloads are abandoned)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    def describe(self) -> dict[str, Any]:
        """JSON-able identity (no credentials: storage option values are left out)."""
        return {"url": self.url, "storage_options": sorted(self.storage_options)}


def _positive_or_none(value: float | None, name: str) -> float | None:
    if value is None:
        return None
    value = float(value)
    if not value > 0:
        raise ReaderError(f"{name} must be a positive number of seconds or None, got {value!r}")
    return value


@runtime_checkable
class StorageBacked(Protocol):
    """A reader capability: its shards are files under a storage root.

    Who uses it: ``zephon show``/``inspect`` print each shard's file size, and ``zephon index
    --validate`` names a bad record's file by its URL; a reader without it (the kernel's in-memory
    one) is shown by shard ids alone. Every :class:`~zephon_storage.StorageReader` has it.
    """

    @property
    def storage(self) -> Storage:
        """The storage root the shard ids are relative to."""
        ...


class RemoteFile(io.RawIOBase):
    """One remote object as a seekable, read-only binary file whose reads are retried range requests.

    Footer parsers (pyarrow, vortex) take a file object and read a few ranges near its end. An
    fsspec file would retry nothing and, after a read abandoned on timeout, share its position with
    the retry; here every read is a stateless ``read_range`` and the position lives in this object.
    The last range read is kept (at least 64 KiB) because parsers read small pieces close together.
    """

    def __init__(self, storage: Storage, info: FileInfo) -> None:
        super().__init__()
        self._storage = storage
        self.info = info
        self.size = info.size
        self.name = storage.url_of(info.rel)
        self._pos = 0
        self._buf_start = 0
        self._buf = b""

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self.size}.get(whence)
        if base is None:
            raise ValueError(f"invalid whence {whence!r}")
        pos = base + int(offset)
        if pos < 0:
            raise ValueError(f"negative seek position {pos}")
        self._pos = pos
        return pos

    def read(self, size: int | None = -1) -> bytes:
        if self.closed:
            raise ValueError("I/O operation on closed file")
        end = self.size if size is None or size < 0 else min(self.size, self._pos + size)
        if end <= self._pos:
            return b""
        lo, hi = self._buf_start, self._buf_start + len(self._buf)
        if not (lo <= self._pos and end <= hi):
            fetch_end = min(self.size, max(end, self._pos + _MIN_REMOTE_READ))
            self._buf = self._storage.read_range(self.info.rel, self._pos, fetch_end, self.info)
            self._buf_start = self._pos
        data = self._buf[self._pos - self._buf_start : end - self._buf_start]
        self._pos = end
        return data

    def readall(self) -> bytes:
        return self.read(-1)

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        data = self.read(len(view))
        view[: len(data)] = data
        return len(data)
