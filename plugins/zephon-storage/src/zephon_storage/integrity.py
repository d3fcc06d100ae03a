"""Content checksums: computed by ``zephon index --checksum``, checked by ``verify="checksum"``.

Sizes and sample counts in the manifest catch a missing, short or extended file; they cannot catch
a flipped byte. Parquet without page CRCs, Vortex, LitData and MDS (unless its writer recorded
hashes) decode such a byte into a different value without complaint, so ``zephon index --checksum``
records a SHA-256 of every file (hardware-accelerated on current CPUs: about a second per GB and
core) and readers opened with ``verify="checksum"`` compare it:

* a **remote** file once per node, when it enters the shared shard cache: the first process to
  use the cached copy hashes it and leaves a marker (:meth:`ShardCache.check`), the others trust
  the marker. A copy that fails is discarded and downloaded once more, so a bad cached copy heals
  itself and only a bad source is an error;
* a **local** file once per process, when it is first opened (local data has no cache entry to
  mark; a file changed since is checked again).

A mismatch is a :class:`~zephon_core.errors.ReaderError` naming the file, the expected and the
actual checksum.
"""

from __future__ import annotations

import hashlib
import os
import threading
from concurrent.futures import ThreadPoolExecutor

from zephon_core import ReaderError
from zephon_storage.location import FileInfo, LocalFile, Storage

ALGORITHM = "sha256"
"""The checksum written by ``zephon index --checksum``; manifests store ``"sha256:<hex>"``."""

_BLOCK = 4 * 1024 * 1024

_verified_local: set[tuple[str, int, int, int, str]] = set()
_verified_lock = threading.Lock()


class ChecksumMismatch(ReaderError):
    """A file's content does not match the checksum recorded for it."""


def checksum_of(path: str) -> str:
    """``"sha256:<hex>"`` of a local file, read in blocks (hashlib releases the GIL for each)."""
    h = hashlib.new(ALGORITHM)
    with open(path, "rb") as f:
        while block := f.read(_BLOCK):
            h.update(block)
    return f"{ALGORITHM}:{h.hexdigest()}"


def check_file(path: str, expected: str, what: str) -> None:
    """Raise :class:`ChecksumMismatch` (naming ``what``, expected and actual) unless ``path`` has ``expected``."""
    algorithm = expected.partition(":")[0]
    if algorithm != ALGORITHM:
        raise ReaderError(
            f"{what}: checksum {expected!r} uses an unknown algorithm (expected {ALGORITHM}:...); "
            "rebuild the manifest with `zephon index --checksum`"
        )
    actual = checksum_of(path)
    if actual != expected:
        raise ChecksumMismatch(
            f"{what}: content checksum mismatch: expected {expected} (from `zephon index`), actual {actual}: "
            "the file is corrupt or changed since it was indexed"
        )


def file_checksums(storage: Storage, files: list[FileInfo], workers: int = 8) -> list[str]:
    """The checksums of ``files`` (remote ones through the node cache), hashed on ``workers`` threads."""

    def one(info: FileInfo) -> str:
        local = storage.open_local(info.rel, info)
        try:
            return checksum_of(local.path)
        except OSError as exc:
            raise ReaderError(f"{storage.url_of(info.rel)}: cannot read to checksum it: {exc}") from None
        finally:
            local.release()

    if len(files) <= 1 or workers <= 1:
        return [one(f) for f in files]
    with ThreadPoolExecutor(min(workers, len(files)), thread_name_prefix="zephon-checksum") as pool:
        return list(pool.map(one, files))


def open_verified(storage: Storage, info: FileInfo, expected: str) -> LocalFile:
    """:meth:`Storage.open_local` of ``info``, its content checked against ``expected`` first.

    Remote files are checked once per node (when the copy enters the cache), local ones once per
    process. Raises a ``ReaderError`` naming the file on a mismatch.
    """
    what = storage.url_of(info.rel)
    if storage.is_local:
        local = storage.open_local(info.rel, info)
        try:
            _check_local_once(local.path, expected, what)
        except BaseException:
            local.release()
            raise
        return local
    key = storage.key_of(info)
    for attempt in (1, 2):
        local = storage.open_local(info.rel, info)
        try:
            storage.cache.check(key, expected, lambda path: check_file(path, expected, what))
            return local
        except ChecksumMismatch:
            local.release()
            # The cached copy may be the bad one (a disk fault, an interrupted earlier version):
            # drop it and download once more; a second mismatch is the source's.
            if attempt == 2 or not storage.cache.discard(key):
                raise
        except BaseException:
            local.release()
            raise
    raise AssertionError("unreachable")


def _check_local_once(path: str, expected: str, what: str) -> None:
    try:
        st = os.stat(path)
    except OSError as exc:
        raise ReaderError(f"{what}: cannot open: {exc}") from None
    key = (os.path.realpath(path), st.st_ino, st.st_size, st.st_mtime_ns, expected)
    with _verified_lock:
        if key in _verified_local:
            return
    check_file(path, expected, what)
    with _verified_lock:
        _verified_local.add(key)

