"""A node-local, byte-bounded LRU cache of whole files that many processes share safely.

Remote shards (and decompressed copies of compressed ones) are materialised here once per node:
every data-loading process on the node asks the same cache, and the first one to ask produces the
file while the others wait for it. Coordination uses only the file system:

* ``<key>.lock`` — an ``fcntl.flock`` lock file per entry. The producer holds it exclusively while
  writing; readers hold it shared for as long as they use the file (a *pin*), so eviction never
  removes a file that someone is reading. Locks die with their process, so a crash never leaves a
  stale lock behind. Lock files are tiny and are never deleted (deleting one would let two
  processes lock different files of the same name).
* ``<key>.tmp-…`` — the producer writes here and renames into place atomically, so a reader sees
  either no file or a complete one.
* ``.evict.lock`` — serialises eviction. Least recently used entries (by mtime, refreshed on every
  use) are removed until the cache fits its byte limit; pinned entries are skipped.
* ``<key>.checked`` — written once an entry's content was checked (``verify="checksum"``): the check
  runs once per node, not once per process, and eviction removes the marker with its entry.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import hashlib
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from zephon_core import ReaderError, ZephonError

_SUFFIXES = (".lock", ".evict.lock", ".checked")
_CHECKED = ".checked"
_TMP = ".tmp-"


def cache_key(*parts: object, name: str = "") -> str:
    """A file-name-safe key: a digest of ``parts`` plus a readable, extension-keeping tail of ``name``."""
    digest = hashlib.sha256("\0".join(map(str, parts)).encode("utf-8")).hexdigest()[:32]
    tail = re.sub(r"[^A-Za-z0-9._-]", "_", name.rsplit("/", 1)[-1])[-80:]
    return f"{digest}-{tail}" if tail else digest


@dataclass
class CachedFile:
    """A pinned cache entry: ``path`` stays on disk until :meth:`release` (or garbage collection).

    Attributes:
        path: the complete local file.
        produced: True when this call produced the file (the others found it ready).
    """

    path: str
    produced: bool
    _fd: int | None

    def release(self) -> None:
        """Unpin the entry; eviction may remove it from now on."""
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def __enter__(self) -> CachedFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __del__(self) -> None:
        self.release()


def _flock(fd: int, op: int, timeout: float, what: str, give_up: Callable[[], bool] | None = None) -> bool:
    """``flock`` with a deadline: poll non-blocking so a wedged peer can never hang us.

    Returns False (without the lock) as soon as ``give_up()`` is true: a waiter for the exclusive
    lock stops waiting once another producer made the entry, since that producer keeps a shared lock
    for as long as it uses the entry (waiting for it would wait for the reader to finish).
    """
    deadline = time.monotonic() + timeout
    delay = 0.005
    while True:
        try:
            fcntl.flock(fd, op | fcntl.LOCK_NB)
            return True
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise
        if give_up is not None and give_up():
            return False
        if time.monotonic() >= deadline:
            raise ReaderError(f"{what}: timed out after {timeout:.0f}s waiting for another process to finish it")
        time.sleep(delay)
        delay = min(delay * 2, 0.2)


class ShardCache:
    """Byte-bounded LRU of whole files in ``directory``, shared by every process that uses it.

    Args:
        directory: created if missing; put it on node-local disk.
        max_bytes: eviction keeps the total size of complete entries at or below this (pinned
            entries may push it over temporarily; they are evicted once released).
        lock_timeout: longest wait, in seconds, for another process producing the same entry.
    """

    def __init__(self, directory: str, max_bytes: int, lock_timeout: float = 900.0) -> None:
        self.directory = os.path.abspath(directory)
        self.max_bytes = int(max_bytes)
        self.lock_timeout = float(lock_timeout)
        try:
            os.makedirs(self.directory, exist_ok=True)
        except OSError as exc:
            raise ReaderError(f"cannot create cache directory {self.directory!r}: {exc}") from exc

    def path_of(self, key: str) -> str:
        """Where the entry ``key`` lives once complete."""
        return os.path.join(self.directory, key)

    def _open_lock(self, key: str) -> int:
        return os.open(self.path_of(key) + ".lock", os.O_RDWR | os.O_CREAT, 0o666)

    def acquire(
        self,
        key: str,
        produce: Callable[[str], None],
        *,
        what: str,
        expected_size: int | None = None,
    ) -> CachedFile:
        """Return the pinned entry ``key``, producing it with ``produce(tmp_path)`` if it is missing.

        Only one process produces an entry; the others wait (up to ``lock_timeout``) and reuse it.

        Args:
            key: from :func:`cache_key`; must change whenever the source changes.
            produce: writes the complete file to the given path (retries are its own business).
            what: the source (a URL), named in errors.
            expected_size: when known, a produced file of another size is an error (truncated
                download), and a cached one of another size is replaced.
        """
        path = self.path_of(key)
        fd = self._open_lock(key)
        try:
            _flock(fd, fcntl.LOCK_SH, self.lock_timeout, what)
            if self._ready(path, expected_size):
                self._touch(path)
                return CachedFile(path, False, fd)
            # Drop the shared lock before asking for the exclusive one: two waiters upgrading in
            # place would each wait for the other's shared lock.
            fcntl.flock(fd, fcntl.LOCK_UN)
            made = functools.partial(self._ready, path, expected_size)
            if not _flock(fd, fcntl.LOCK_EX, self.lock_timeout, what, give_up=made):
                _flock(fd, fcntl.LOCK_SH, self.lock_timeout, what)  # made by another: share it
                self._touch(path)
                return CachedFile(path, False, fd)
            if self._ready(path, expected_size):
                fcntl.flock(fd, fcntl.LOCK_SH)
                self._touch(path)
                return CachedFile(path, False, fd)
            self._produce(path, produce, what, expected_size)
            fcntl.flock(fd, fcntl.LOCK_SH)
        except BaseException:
            os.close(fd)
            raise
        cached = CachedFile(path, True, fd)
        self.evict()
        return cached

    def warm(self, key: str, produce: Callable[[str], None], *, what: str, expected_size: int | None = None) -> bool:
        """Make sure ``key`` is cached without pinning it; True if this call produced it."""
        with self.acquire(key, produce, what=what, expected_size=expected_size) as entry:
            return entry.produced

    @staticmethod
    def _ready(path: str, expected_size: int | None) -> bool:
        try:
            size = os.stat(path).st_size
        except FileNotFoundError:
            return False
        return expected_size is None or size == expected_size

    @staticmethod
    def _touch(path: str) -> None:
        with contextlib.suppress(OSError):
            os.utime(path)

    def _produce(self, path: str, produce: Callable[[str], None], what: str, expected_size: int | None) -> None:
        self.evict(incoming=expected_size or 0)
        tmp = f"{path}{_TMP}{os.getpid()}-{threading.get_ident()}"
        try:
            produce(tmp)
            size = os.stat(tmp).st_size
            if expected_size is not None and size != expected_size:
                raise ReaderError(f"{what}: got {size} bytes, expected {expected_size} (truncated transfer?)")
            os.replace(tmp, path)
        except ZephonError:
            raise
        except OSError as exc:
            raise ReaderError(f"{what}: cannot write cache file under {self.directory!r}: {exc}") from exc
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)

    # -- content checks ---------------------------------------------------------------------------
    def check(self, key: str, check_id: str, check: Callable[[str], None]) -> bool:
        """Run ``check(path)`` on the complete entry ``key`` unless it already passed a check ``check_id``.

        The caller holds a pin on the entry. A passed check is remembered in ``<key>.checked``
        (naming ``check_id`` and the file's inode and size, so an entry evicted and produced again is
        checked again). ``check`` raises to reject the entry; see :meth:`discard`.

        Returns:
            True when ``check`` ran (False: the entry had passed already).
        """
        path = self.path_of(key)
        try:
            st = os.stat(path)
        except FileNotFoundError:
            raise ReaderError(f"cache entry {path!r} vanished while pinned") from None
        token = f"{check_id} {st.st_ino} {st.st_size}"
        marker = path + _CHECKED
        with contextlib.suppress(OSError):
            with open(marker, encoding="utf-8") as f:
                if f.read() == token:
                    return False
        check(path)
        tmp = f"{marker}{_TMP}{os.getpid()}-{threading.get_ident()}"
        with contextlib.suppress(OSError):  # no marker: the next process checks again, nothing worse
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(token)
            os.replace(tmp, marker)
        return True

    def discard(self, key: str) -> bool:
        """Remove entry ``key`` (one that failed its check) unless someone pins it; True if removed."""
        return self._try_remove(key)

    # -- bookkeeping ------------------------------------------------------------------------------
    def entries(self) -> Iterator[tuple[str, os.stat_result]]:
        """Complete entries as ``(key, stat)``: no lock files, no partial downloads."""
        with os.scandir(self.directory) as it:
            for e in it:
                n = e.name
                if n.startswith(".") or n.endswith(_SUFFIXES) or _TMP in n:
                    continue
                with contextlib.suppress(FileNotFoundError):
                    yield n, e.stat()

    def usage(self) -> int:
        """Bytes held by complete entries."""
        return sum(st.st_size for _, st in self.entries())

    def evict(self, incoming: int = 0) -> int:
        """Remove least recently used, unpinned entries until ``usage + incoming <= max_bytes``.

        Returns the number of bytes freed. Also removes partial files left by crashed producers.
        """
        fd = os.open(os.path.join(self.directory, ".evict.lock"), os.O_RDWR | os.O_CREAT, 0o666)
        try:
            _flock(fd, fcntl.LOCK_EX, self.lock_timeout, f"cache {self.directory!r} eviction")
            self._remove_orphans()
            entries = sorted(self.entries(), key=lambda e: e[1].st_mtime_ns)
            total = sum(st.st_size for _, st in entries) + incoming
            freed = 0
            for key, st in entries:
                if total <= self.max_bytes:
                    break
                if self._try_remove(key):
                    total -= st.st_size
                    freed += st.st_size
            return freed
        finally:
            os.close(fd)

    def _try_remove(self, key: str) -> bool:
        lock = self._open_lock(key)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(lock)
            return False  # pinned or being produced
        try:
            with contextlib.suppress(FileNotFoundError):  # the marker first: it must never outlive its entry
                os.unlink(self.path_of(key) + _CHECKED)
            os.unlink(self.path_of(key))
            return True
        except FileNotFoundError:
            return False
        finally:
            os.close(lock)

    def _remove_orphans(self) -> None:
        with os.scandir(self.directory) as it:
            tmps = [e.name for e in it if _TMP in e.name]
        for name in tmps:
            key = name.split(_TMP, 1)[0]
            lock = self._open_lock(key)
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # its producer is alive
            finally:
                os.close(lock)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(self.directory, name))
