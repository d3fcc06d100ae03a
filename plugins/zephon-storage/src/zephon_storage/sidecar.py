"""Sidecar indexes: one index file per data file, kept beside it and checked against it on every open.

Formats that cannot be read at random without a table of offsets (JSON Lines, WebDataset tars)
build that table once per data file and keep it as a *sidecar* (``<file><suffix>``) beside the
data when that folder is writable, else in ``<cache_dir>/index/``. What an index holds is the
plugin's business; what it has to do around it is the same for every format, and lives here once:

* :class:`SourceIdentity` — what an index was built from (size, version, CRCs of the first and
  last :data:`IDENTITY_PROBE` bytes), so a changed data file is a stale index instead of wrong
  records, while a copy with a new mtime (``cp``, ``rsync`` without ``-t``) or an index built
  locally and uploaded beside remote objects stays valid.
* :func:`write_sidecar` / :func:`read_sidecar_header` — the common file frame (4-byte magic, a
  version byte, a JSON header padded to 8 bytes, then the plugin's body), written atomically with
  the data file's permission bits, so readers never see half an index and whoever may read the data
  may read its index.
* :class:`IndexedFileReader` — a :class:`~zephon_storage.FileReader` that finds, downloads,
  checks, adopts, builds and saves those indexes; a plugin supplies only how to read, write and
  build its own format.
* :func:`data_read_only` — readers built inside it never write beside the data: they use a fresh
  index found there, but build a missing one in the cache directory and never rewrite one. What
  ``zephon show`` and ``zephon inspect`` use, so that looking at a dataset leaves its folder as it was.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import secrets
import struct
import threading
import zlib
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from zephon_core import ReaderError
from zephon_storage.cache import cache_key
from zephon_storage.location import FileInfo, LocalFile
from zephon_storage.manifest import shared_mode
from zephon_storage.readers import FileReader, Release
from zephon_storage.retry import call_with_retry

IDENTITY_PROBE = 64 * 1024
"""Bytes at each end of a data file whose CRCs identify its content (cheap even for remote data)."""

_PREFIX = struct.Struct("<4sB3xQ")
"""magic, format version, 3 pad bytes, JSON header length: the first 16 bytes of every sidecar."""

_DATA_READ_ONLY: contextvars.ContextVar[bool] = contextvars.ContextVar("zephon_data_read_only", default=False)


@contextlib.contextmanager
def data_read_only() -> Iterator[None]:
    """Indexed readers built in this block leave the data folder untouched (see :class:`IndexedFileReader`).

    Why a block rather than a reader option: commands that only look at a dataset open it through
    :meth:`~zephon_core.work.dataset.Dataset.from_path`, which builds whichever reader the installed
    plugins detect and lists its shards (building indexes) at once; a reader option would have to
    be known to every format. The choice is read when a reader is built and kept in it (it pickles
    with it), so its later reads, in any thread or process, behave the same.
    """
    token = _DATA_READ_ONLY.set(True)
    try:
        yield
    finally:
        _DATA_READ_ONLY.reset(token)


@dataclass(frozen=True)
class SourceIdentity:
    """What an index was built from; compared with the data file as listed now on every open.

    ``version`` is whatever the storage lists (mtime for local files, ETag / LastModified for
    remote ones); ``head_crc`` / ``tail_crc`` are CRC-32s of the first and last :data:`IDENTITY_PROBE`
    bytes, None when the index was built without them.
    """

    size: int
    version: str
    head_crc: int | None = None
    tail_crc: int | None = None

    def matches(self, now: SourceIdentity) -> bool:
        """Same size and either the same version or the same head and tail bytes.

        Falling back to content CRCs keeps an index valid across ``cp`` / ``rsync`` without ``-t``
        and uploads, which change the version but not the data.
        """
        if self.size != now.size:
            return False
        if self.version == now.version:
            return True
        return self.head_crc is not None and (self.head_crc, self.tail_crc) == (now.head_crc, now.tail_crc)

    def to_json(self) -> dict[str, Any]:
        """The ``"source"`` entry of a sidecar header (key order is part of the file format)."""
        return {"size": self.size, "version": self.version, "head_crc": self.head_crc, "tail_crc": self.tail_crc}

    @classmethod
    def from_json(cls, src: Mapping[str, Any]) -> SourceIdentity:
        """Parse :meth:`to_json`'s output (CRCs may be absent from older headers)."""
        return cls(int(src["size"]), str(src["version"]), src.get("head_crc"), src.get("tail_crc"))


def identity_of(read: Callable[[int, int], bytes], size: int, version: str) -> SourceIdentity:
    """Identity from a ``read(start, end)`` of a file's first and last :data:`IDENTITY_PROBE` bytes."""
    head = read(0, min(size, IDENTITY_PROBE))
    tail = read(max(0, size - IDENTITY_PROBE), size)
    return SourceIdentity(size, version, zlib.crc32(head), zlib.crc32(tail))


def local_identity(path: str, *, with_crc: bool = True) -> SourceIdentity:
    """Identity of a local file as it is now: size and mtime from ``stat``, optionally the CRCs.

    The size is the file's current one, not the listed one, so a file that grew or shrank since
    it was listed never passes as the file an index was built for.
    """
    st = os.stat(path)
    if not with_crc:
        return SourceIdentity(st.st_size, str(st.st_mtime_ns))
    fd = os.open(path, os.O_RDONLY)
    try:
        head = os.pread(fd, IDENTITY_PROBE, 0)
        tail = os.pread(fd, IDENTITY_PROBE, max(0, st.st_size - IDENTITY_PROBE))
    finally:
        os.close(fd)
    return SourceIdentity(st.st_size, str(st.st_mtime_ns), zlib.crc32(head), zlib.crc32(tail))


# -- the file frame -------------------------------------------------------------------------------
def write_sidecar(
    path: str,
    magic: bytes,
    version: int,
    header: Mapping[str, Any],
    body: Iterable[bytes],
    *,
    like: str | None = None,
    mode: int | None = None,
) -> None:
    """Write a sidecar atomically (temp file in the same folder + rename): never half an index.

    Layout: ``magic`` (4 bytes), ``version`` (u8), 3 pad bytes, the header length (u64, little
    endian), ``header`` as JSON padded with spaces to a multiple of 8 bytes (so arrays that follow
    stay aligned for memory maps), then each chunk of ``body`` in order.

    Args:
        path: where the index goes; its folder is created.
        magic: 4 bytes naming the format, checked by :func:`read_sidecar_header`.
        version: the format version.
        header: JSON-serialisable description of the body (counts, the source identity, ...).
        body: the rest of the file, written as given (a generator is consumed inside the write).
        like: the data file the index describes; the index gets its permission bits (execute bits
            dropped), so whoever may read the data may read its index.
        mode: permission bits when ``like`` gives none. None: the process umask decides, as for any
            new file (not ``mkstemp``'s 0600, which would lock out a dataset's group).

    Raises:
        OSError: the folder is not writable (callers fall back to another place), or the disk is full.
    """
    if len(magic) != 4:
        raise ValueError(f"sidecar magic must be 4 bytes, got {magic!r}")
    text = json.dumps(dict(header)).encode()
    text += b" " * (-len(text) % 8)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    kind = os.path.splitext(path)[1].lstrip(".") or "sidecar"
    tmp = os.path.join(folder, f".{kind}-{os.getpid()}-{threading.get_ident()}-{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # umask applies, unlike mkstemp's 0600
    try:
        with os.fdopen(fd, "wb") as f:
            bits = shared_mode([like]) if like is not None else None
            if bits is None:
                bits = mode
            if bits is not None:
                os.fchmod(f.fileno(), bits)
            f.write(_PREFIX.pack(magic, version, len(text)) + text)
            for chunk in body:
                f.write(chunk)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def read_sidecar_header(path: str, name: str, magic: bytes, version: int, kind: str) -> tuple[dict[str, Any], int]:
    """The JSON header of a sidecar written by :func:`write_sidecar`, and the offset its body starts at.

    Args:
        path: the index file.
        name: the data file's name (URL), which every error starts with.
        magic: the magic bytes the plugin writes; anything else is an error.
        version: the index version the plugin writes; anything else is an error (rebuild the index).
        kind: the format, as said in the error for a wrong magic (``"zephon-jsonl"``).

    Raises:
        ReaderError: not this kind of index, or another version of it (rebuild it).
        OSError, ValueError, struct.error: unreadable; the plugin words those with its own context.
    """
    with open(path, "rb") as f:
        pre = f.read(_PREFIX.size)
        if len(pre) < _PREFIX.size or pre[:4] != magic:
            raise ReaderError(f"{name}: index {path} is not a {kind} index")
        _, found, hlen = _PREFIX.unpack(pre)
        if found != version:
            raise ReaderError(f"{name}: index {path} has version {found}, expected {version}; rebuild it")
        header: dict[str, Any] = json.loads(f.read(hlen))
    return header, _PREFIX.size + hlen


def check_sidecar_size(path: str, name: str, expected: int) -> None:
    """``ReaderError`` unless the index file has the size its header implies (a cut-short copy)."""
    if os.path.getsize(path) != expected:
        raise ReaderError(f"{name}: index {path} is truncated; delete it or rebuild it with `zephon index`")


# -- the reader base ------------------------------------------------------------------------------
class SidecarIndex(Protocol):
    """What :class:`IndexedFileReader` needs of a plugin's in-memory index: what it was built from."""

    source: SourceIdentity


IndexT = TypeVar("IndexT", bound=SidecarIndex)


class IndexedFileReader(FileReader, Generic[IndexT]):
    """A :class:`FileReader` whose data files each have a sidecar index (one shard per file).

    The reader keeps ``<file><index_suffix>`` beside a local data file (falling back to
    ``<cache_dir>/index/`` when that folder is read-only) and always in the cache directory for
    remote data, where an index uploaded beside the objects (``zephon index s3://…``) is downloaded
    instead of rebuilt. An index found is checked against the data file as listed now
    (:meth:`_fresh`); one whose data changed is an error naming both unless ``rebuild_stale``.
    A reader built inside :func:`data_read_only` reads a fresh index beside the data but writes
    nothing there: it builds a missing (or stale) index in the cache directory and does not rewrite
    one whose file was copied.

    Subclasses set :attr:`index_suffix` (and :attr:`index_noun` for messages), call
    :meth:`_init_indexes` in ``__init__`` (options ``rebuild_stale``: rebuild an index whose data
    file changed instead of raising an error; ``index_dir``: keep indexes there instead of beside
    the data / in the cache directory), call :meth:`_check_orphan_indexes` from their listing after
    setting ``self._remote_indexes``, and implement the format hooks :meth:`_read_index`,
    :meth:`_write_index`, :meth:`_with_source` and :meth:`_build_index` (which ends with
    :meth:`_save_index`). :meth:`_index` is the index of a shard; :meth:`_open_indexed` opens its
    data file checked against the size the index was built for.
    """

    index_suffix: ClassVar[str]
    """Ending of an index file's name after its data file's name (``".zidx"``)."""

    index_noun: ClassVar[str] = "file"
    """What a data file is called in errors (``"tar"``)."""

    _RUNTIME: ClassVar[tuple[str, ...]] = ("_indexes",)

    def _init_indexes(self, *, rebuild_stale: bool, index_dir: str | None) -> None:
        """Set the index options; subclasses call it in ``__init__`` right after ``super().__init__``.

        Not part of ``__init__`` so that a subclass passes :class:`FileReader`'s options on unchanged.
        """
        self.rebuild_stale = bool(rebuild_stale)
        self.index_dir = index_dir
        self.data_read_only = _DATA_READ_ONLY.get()
        """Built inside :func:`data_read_only`: write no index beside the data (use the cache directory)."""
        self._remote_indexes: set[str] = set()
        """Index files listed beside the data (relative paths), downloaded instead of rebuilt."""
        self.built_indexes = 0
        """Indexes this reader built (not found fresh): what ``zephon index`` reports."""

    def _init_runtime(self) -> None:
        super()._init_runtime()
        self._indexes: dict[int, IndexT] = {}

    # -- format hooks -------------------------------------------------------------------------------
    def _read_index(self, path: str, name: str) -> IndexT:
        """Load the index at ``path`` of data file ``name`` (``ReaderError`` naming both if unreadable)."""
        raise NotImplementedError

    def _write_index(self, path: str, idx: IndexT, info: FileInfo) -> None:
        """Save ``idx`` (of data file ``info``) at ``path`` atomically, e.g. with :func:`write_sidecar`."""
        raise NotImplementedError

    def _with_source(self, idx: IndexT, source: SourceIdentity) -> IndexT:
        """``idx`` recording ``source`` as what it was built from (``idx`` itself is left as it is)."""
        raise NotImplementedError

    def _build_index(self, i: int, paths: list[str]) -> IndexT:
        """Scan shard ``i``'s data file and save its index with :meth:`_save_index` at one of ``paths``."""
        raise NotImplementedError

    # -- listing ------------------------------------------------------------------------------------
    def _check_orphan_indexes(self, data: Collection[str]) -> None:
        """An index listed beside the data whose data file is not there is an error (unless one file was named).

        The data file was most likely deleted or renamed by mistake; a silently smaller dataset
        would go unnoticed.
        """
        n = len(self.index_suffix)
        orphans = sorted(rel[:-n] for rel in self._remote_indexes if rel[:-n] not in data)
        if orphans and not self.storage.is_single_file:
            raise ReaderError(
                f"{self.storage.url_of(orphans[0])}: missing, but its index {orphans[0]}{self.index_suffix} is "
                f"there (the {self.index_noun} was deleted or renamed; delete the index too if that was on purpose)"
            )

    # -- finding and checking indexes ---------------------------------------------------------------
    def _index(self, i: int) -> IndexT:
        """Shard ``i``'s index: loaded or built once per process, under the reader's lock."""
        idx = self._indexes.get(i)
        if idx is not None:
            return idx
        with self._lock:
            idx = self._indexes.get(i)
            if idx is None:
                idx = self._indexes[i] = self._load_or_build(i)
        return idx

    def _index_paths(self, info: FileInfo) -> list[str]:
        """Where the index of ``info`` may be, in the order they are tried (and written)."""
        key = cache_key(self.storage.url_of(info.rel), name=info.rel) + self.index_suffix
        if self.index_dir:
            return [os.path.join(self.index_dir, key)]
        cached = os.path.join(self.storage.cache_dir, "index", key)
        if self.storage.is_local:
            return [self.storage.full_path(info.rel) + self.index_suffix, cached]
        return [cached]

    def _current_identity(self, info: FileInfo) -> SourceIdentity:
        """The data file's identity now, with content CRCs (local: ``stat`` and ``pread``; remote: range reads)."""
        if self.storage.is_local:
            return local_identity(self.storage.full_path(info.rel))
        return identity_of(
            lambda start, end: self.storage.read_range(info.rel, start, end, info), info.size, info.version
        )

    def _fresh(self, built: SourceIdentity, info: FileInfo) -> bool:
        """Whether an index built for ``built`` fits the file as listed now.

        Same size and version is enough. Otherwise (a copy with a new mtime, an index built locally
        and uploaded beside remote objects) the first and last :data:`IDENTITY_PROBE` bytes must match.
        """
        if built.matches(SourceIdentity(info.size, info.version)):
            return True
        if built.size != info.size or built.head_crc is None:
            return False
        return built.matches(self._current_identity(info))

    def _load_or_build(self, i: int) -> IndexT:
        """A fresh index of shard ``i`` from any of its places, else a new one (or a stale-index error)."""
        info, name = self.files()[i], self._name(i)
        paths = self._index_paths(info)
        if not self.storage.is_local and not os.path.exists(paths[0]):
            self._download_index(info, paths[0])
        stale: tuple[str, SourceIdentity] | None = None
        for p in paths:
            if os.path.exists(p):
                idx = self._read_index(p, name)
                if self._fresh(idx.source, info):
                    if idx.source.version != info.version:
                        idx = self._adopt(p, idx, info, name)
                    return idx
                stale = (p, idx.source)
        if stale is not None and not self.rebuild_stale:
            p, src = stale
            noun = self.index_noun
            raise ReaderError(
                f"{name}: index {p} is stale (built for a {noun} of {src.size} bytes, version {src.version}; "
                f"the {noun} now has {info.size} bytes, version {info.version}). Rebuild it with "
                f"`zephon index {self.path}`, delete it, or pass rebuild_stale=True"
            )
        return self._build_index(i, paths)

    def _adopt(self, path: str, idx: IndexT, info: FileInfo, name: str) -> IndexT:
        """Record the file's current version in a content-checked index, so the check runs once."""
        if self.data_read_only and path == self._beside_data(info):
            return idx  # the data folder is not to be written: keep checking contents next time
        src = idx.source
        updated = self._with_source(idx, SourceIdentity(info.size, info.version, src.head_crc, src.tail_crc))
        try:
            self._write_index(path, updated, info)
        except OSError:
            return idx  # read-only location: keep checking contents next time
        return self._read_index(path, name)

    def _download_index(self, info: FileInfo, dest: str) -> None:
        """Copy the index uploaded beside a remote data file (if one was listed) to ``dest``."""
        remote = info.rel + self.index_suffix
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

    def _save_index(self, paths: Sequence[str], idx: IndexT, info: FileInfo, name: str) -> IndexT:
        """Write a new index at the first writable place of ``paths`` and load it back from there.

        A read-only data folder falls through to the cache directory, and so does a reader built in
        :func:`data_read_only`; any other write error is raised. Loading the written file back gives
        memory-mapped arrays, shared by processes.
        """
        if self.data_read_only:
            beside = self._beside_data(info)
            paths = [p for p in paths if p != beside]
        for p in paths:
            try:
                self._write_index(p, idx, info)
            except OSError:
                if not os.access(os.path.dirname(os.path.abspath(p)), os.W_OK):
                    continue  # read-only data folder: fall back to the cache directory
                raise
            with self._lock:  # zephon index builds several files' indexes at once
                self.built_indexes += 1
            return self._read_index(p, name)
        raise ReaderError(f"{name}: no writable place for its index (tried {list(paths)}); pass index_dir=")

    def _beside_data(self, info: FileInfo) -> str | None:
        """The index path beside a local data file (None for remote data or an ``index_dir``)."""
        if self.index_dir or not self.storage.is_local:
            return None
        return self.storage.full_path(info.rel) + self.index_suffix

    def _data_path(self, info: FileInfo) -> str | None:
        """The local path of a data file, whose permission bits its index copies (None when remote)."""
        return self.storage.full_path(info.rel) if self.storage.is_local else None

    def _open_indexed(self, i: int, local: LocalFile, indexed_size: int) -> tuple[int, Release]:
        """A descriptor of shard ``i``'s local data (``local``, released with it) of the size its index expects.

        A data file cut short or rewritten after indexing would otherwise yield wrong records or
        short reads deep into a run; a size check at open costs one ``fstat``.
        """
        try:
            fd = os.open(local.path, os.O_RDONLY)
        except OSError as exc:
            local.release()
            raise ReaderError(f"{self._name(i)}: cannot open: {exc}") from None
        size = os.fstat(fd).st_size
        if size != indexed_size:
            os.close(fd)
            local.release()
            raise ReaderError(
                f"{self._name(i)}: has {size} bytes but its index was built for {indexed_size}: "
                f"the {self.index_noun} changed or was truncated after indexing"
            )

        def release() -> None:
            os.close(fd)
            local.release()

        return fd, release
