"""``Storage``: one dataset root on any fsspec file system, and local access to its files.

Format libraries (pyarrow, vortex, ``os.pread``) are fastest on a local file, so readers ask
:meth:`Storage.open_local` for a path: a local dataset is used in place; a remote one (``s3://``,
``gs://``, ``memory://``, …) is downloaded once per node into the shared :class:`ShardCache` and
read from there. A ``Storage`` pickles to its configuration only, so a reader holding one can be
sent to worker processes, which reconnect lazily.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from zephon_core.errors import ReaderError
from zephon_core.storage.cache import CachedFile, ShardCache, cache_key
from zephon_core.storage.config import default_cache_bytes, default_cache_dir, parse_bytes
from zephon_core.storage.retry import call_with_retry, describe_error

_COPY_BLOCK = 8 * 1024 * 1024


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
        prefetch_workers: threads that warm the cache in the background.
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
        prefetch_workers: int = 2,
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
        keep = ("url", "storage_options", "cache_dir", "cache_bytes", "retries", "backoff", "prefetch_workers")
        return {k: self.__dict__[k] for k in (*keep, "lock_timeout")} | {"_base": self._base, "_single": self._single}

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
                self._fs, self._root = fsspec.core.url_to_fs(self.url, **self.storage_options)
            except Exception as exc:
                raise ReaderError(f"cannot open {self.url!r}: {describe_error(exc)}") from exc
        return self._fs

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

    def _retry(self, fn: Callable[[], Any], what: str) -> Any:
        return call_with_retry(fn, what=what, attempts=self.retries, base_delay=self.backoff)

    def read_bytes(self, rel: str) -> bytes:
        """The whole content of a small file (an index, a manifest), read with retries."""

        def fetch() -> bytes:
            with self.fs.open(self.full_path(rel), "rb") as f:
                return f.read()

        return self._retry(fetch, self.url_of(rel))

    def _resolve(self) -> str:
        """The folder that relative paths hang off; detects a single-file dataset once."""
        if self._base is None:
            fs, root = self.fs, self._root
            if self._retry(lambda: fs.isdir(root), self.url):
                self._base = root.rstrip("/")
            elif self._retry(lambda: fs.exists(root), self.url):
                self._base, _, self._single = root.rpartition("/")
            else:
                raise ReaderError(f"dataset path {self.url!r} does not exist")
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
        found = self._retry(lambda: self.fs.find(base, detail=True), self.url)
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

    def open_remote(self, rel: str) -> Any:
        """A seekable file object read through fsspec (for footers: a few range requests)."""
        return self._retry(lambda: self.fs.open(self.full_path(rel), "rb"), self.url_of(rel))

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
        """Copy ``info.rel`` to ``tmp``; an object that changed since it was listed is an error.

        Pointers were computed from the listed object, so silently reading a newer version of it
        would hand out the wrong samples.
        """
        src, url = self.full_path(info.rel), self.url_of(info.rel)

        def once() -> None:
            with self.fs.open(src, "rb") as fin, open(tmp, "wb") as fout:
                shutil.copyfileobj(fin, fout, _COPY_BLOCK)

        self._retry(once, url)
        got = os.path.getsize(tmp)
        if got != info.size:
            now = self.info(info.rel)
            if (now.size, now.version) != (info.size, info.version):
                raise ReaderError(
                    f"{url}: the object changed since the dataset was listed "
                    f"(size {info.size} -> {now.size}, version {info.version} -> {now.version})"
                )

    # -- prefetching ------------------------------------------------------------------------------
    def prefetch(self, rels: Iterable[str]) -> list[Future[Any]]:
        """Warm the cache with these files in the background (in order); returns their futures.

        Errors are kept in the futures, not raised: the foreground read of the same file raises
        them with full context if they persist. For local data this asks the OS to read ahead.
        """
        futures = []
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.prefetch_workers, thread_name_prefix="zephon-prefetch")
            for rel in rels:
                fut = self._pending.get(rel)
                if fut is None or (fut.done() and fut.exception() is not None):
                    fut = self._pool.submit(self._warm, rel)
                    self._pending[rel] = fut
                futures.append(fut)
        return futures

    def _warm(self, rel: str) -> bool:
        if self.is_local:
            with contextlib.suppress(OSError, AttributeError):
                fd = os.open(self.full_path(rel), os.O_RDONLY)
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
                finally:
                    os.close(fd)
            return False
        info = self.info(rel)
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
