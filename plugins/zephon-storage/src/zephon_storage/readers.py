"""Base classes for readers whose data lives under one :class:`Storage` root.

Every format plugin used to repeat the same plumbing: split the storage options from its own, open a
:class:`Storage`, pickle to its configuration and reopen files lazily in each worker process, list
its data files (held to the ``zephon index`` manifest), keep a few files open, warm the cache ahead
of the reader and hand repeated indices back as independent dicts. The copies drifted (three
readers raised ``TypeError`` for an unknown option, two ``ConfigError``), so the plumbing lives here
once and a plugin writes only what its format needs:

* :class:`StorageReader` — options, the storage root and pickling; the base of both kinds below.
  It also holds what every format shares about damaged data (:data:`INTEGRITY_OPTIONS`): content
  checksums (``verify="checksum"``), skipping records that do not decode (``on_error="skip"``,
  bounded by ``max_bad_fraction``) and the manifest ``zephon index`` writes.
* :class:`FileReader` — one shard per data file (Parquet, Vortex, JSON Lines): listing, the
  manifest, open files, prefetching. :class:`DataFiles` says which files are data and detects a
  dataset from a listing.
* :class:`~zephon_storage.layout.LayoutReader` — datasets described by one index file
  (LitData, Mosaic MDS).
"""

from __future__ import annotations

import inspect
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from zephon_core import ConfigError, Reader, ReaderError, RecordError, ShardInfo
from zephon_storage.integrity import file_checksums, open_verified
from zephon_storage.location import FileInfo, LocalFile, Storage
from zephon_storage.manifest import (
    ManifestEntry,
    check_counts,
    checksums_of,
    list_data_files,
    read_manifest,
    write_manifest,
)

logger = logging.getLogger("zephon.storage")

STORAGE_OPTIONS = (
    "storage_options",
    "cache_dir",
    "cache_bytes",
    "retries",
    "backoff",
    "read_timeout",
    "deadline",
    "prefetch_workers",
    "lock_timeout",
)
"""Reader options that configure :class:`Storage`; readers pass these through unchanged."""

INTEGRITY_OPTIONS = ("verify", "on_error", "max_bad_fraction")
"""Reader options every :class:`StorageReader` takes for damaged data (see :class:`StorageReader`)."""

ON_ERROR = ("raise", "skip")

DEFAULT_MAX_BAD_FRACTION = 0.1
"""With ``on_error="skip"``: more than this share of bad records stops the run (see :class:`StorageReader`)."""

MIN_RECORDS_FOR_FRACTION = 1000
"""Records a process reads from a dataset before ``max_bad_fraction`` is judged (or all, if fewer):
one damaged region met first must not stop a run whose data is 99.9 % fine."""

Release = Callable[[], None]
"""Closes what a reader opened for one shard (a file descriptor, a pinned cache entry, ...)."""


def split_storage_options(options: Mapping[str, object]) -> tuple[dict[str, object], dict[str, object]]:
    """Split reader options into (storage options, the reader's own options)."""
    storage = {k: v for k, v in options.items() if k in STORAGE_OPTIONS}
    rest = {k: v for k, v in options.items() if k not in STORAGE_OPTIONS}
    return storage, rest


def integrity_kwargs(reader: str, options: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split :data:`INTEGRITY_OPTIONS` from ``options`` and check them: ``(integrity, the rest)``.

    Raises:
        ConfigError: a value out of range, naming the reader, the option and what it accepts.
    """
    own = {k: options[k] for k in INTEGRITY_OPTIONS if k in options}
    rest = {k: v for k, v in options.items() if k not in INTEGRITY_OPTIONS}
    verify = own.get("verify")
    if verify not in (None, False, "none", "checksum"):
        raise ConfigError(f"{reader} reader: verify must be 'checksum' or None, got {verify!r}")
    on_error = own.get("on_error", "raise")
    if on_error not in ON_ERROR:
        raise ConfigError(f"{reader} reader: on_error must be one of {list(ON_ERROR)}, got {on_error!r}")
    fraction = own.get("max_bad_fraction")
    if fraction is not None:
        if on_error != "skip":
            raise ConfigError(f"{reader} reader: max_bad_fraction applies only with on_error='skip'")
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 <= fraction <= 1:
            raise ConfigError(f"{reader} reader: max_bad_fraction must be a number in [0, 1], got {fraction!r}")
    return {
        "checksums": verify == "checksum",
        "on_error": on_error,
        "max_bad_fraction": float(DEFAULT_MAX_BAD_FRACTION if fraction is None else fraction),
    }, rest


def storage_kwargs(reader: str, options: Mapping[str, Any], own: Iterable[str] = ()) -> dict[str, Any]:
    """The :class:`Storage` options among ``options``; any other name is an error.

    A misspelled option silently ignored would read a different dataset than the user asked for,
    so it fails when the reader is built, naming the reader and every option it accepts.

    Args:
        reader: the reader's name in messages (its format, e.g. ``"parquet"``).
        options: the keyword arguments the reader did not take itself.
        own: the reader's own option names, listed in the error next to the storage options.

    Raises:
        ConfigError: ``options`` holds a name that is not a storage option.
    """
    storage, unknown = split_storage_options(options)
    if unknown:
        valid = sorted({*own, *STORAGE_OPTIONS})
        raise ConfigError(f"{reader} reader: unknown option(s) {sorted(unknown)}; valid options: {valid}")
    return storage


def is_private_path(rel: str) -> bool:
    """Whether a path part starts with ``.`` or ``_`` (hidden files, Spark's ``_SUCCESS``, our manifest)."""
    return any(part.startswith((".", "_")) for part in rel.split("/"))


@dataclass(frozen=True)
class DataFiles:
    """Which files of a folder dataset hold a format's data, recognised by their suffix.

    Detection has to be cheap (it runs for every installed format on every ``Dataset.from_path``
    without a ``format=``) and must not import the format's library, so it looks at names only.

    Attributes:
        suffixes: the data suffixes, lower case (``(".parquet", ".pq")``).
        what: how errors name these files (``"Parquet files (.parquet, .pq)"``).
        compressions: whole-file compression suffixes that may follow a data suffix, mapped to the
            codec name :meth:`compression_of` returns; ``""`` (no suffix) maps to ``"none"``.
    """

    suffixes: tuple[str, ...]
    what: str
    compressions: tuple[tuple[str, str], ...] = field(default=(("", "none"),))

    def compression_of(self, rel: str) -> str | None:
        """The codec of a data file (``"none"`` when plain), or None when ``rel`` is not a data file name."""
        name = rel.rsplit("/", 1)[-1].lower()
        for ext, kind in self.compressions:
            if ext and not name.endswith(ext):
                continue
            stem = name[: len(name) - len(ext)] if ext else name
            if stem.endswith(self.suffixes):
                return kind
        return None

    def accepts(self, rel: str) -> bool:
        """A data file that is not hidden or private (see :func:`is_private_path`)."""
        return not is_private_path(rel) and self.compression_of(rel) is not None

    def detect(self, fs: Any, root: str, files: list[str]) -> bool:
        """The ``detect`` hook of a reader plugin: True when the listing holds at least one data file."""
        return any(self.accepts(f) for f in files)


class StorageReader(Reader):
    """A reader whose dataset lives under one :class:`Storage` root.

    Subclasses take their own options as keyword-only arguments and pass the rest (``**storage``)
    to ``super().__init__``: storage options configure :attr:`storage`, :data:`INTEGRITY_OPTIONS`
    configure how damaged data is handled, anything else is a :class:`ConfigError` listing the valid
    options (the subclass's keyword-only arguments plus those two lists).

    Damaged data, the same for every format:

    * ``verify="checksum"``: check each file's content against the SHA-256 that ``zephon index
      --checksum`` recorded in the manifest (:mod:`~zephon_storage.integrity`), once per node
      for remote files and once per process for local ones. Without a recorded checksum the reader
      refuses to start.
    * ``on_error="skip"``: a record whose bytes do not decode (the reader raises
      :class:`~zephon_core.errors.RecordError`) is returned as ``None`` by :meth:`read_or_skip`,
      which the fetch stage turns into a tombstone. Decoding is a function of the bytes, so the
      same records are skipped on every rank, runner and resume. A missing or short file is never
      skipped.
    * ``max_bad_fraction`` (default :data:`DEFAULT_MAX_BAD_FRACTION`): when more than this share of
      the records a process has read from the dataset were skipped (judged after
      :data:`MIN_RECORDS_FOR_FRACTION` records, or the whole dataset if smaller), the data is
      mostly broken and the read fails with a ``ReaderError`` saying so.

    Readers are pickled into every worker process, so per-process state (open files, locks, caches,
    compiled decoders) is built by :meth:`_init_runtime` and left out of the pickle: list those
    attributes in ``_RUNTIME`` and call ``self._init_runtime()`` at the end of ``__init__``. Each
    class lists only its own; the lists of its bases count too.
    """

    _RUNTIME: ClassVar[tuple[str, ...]] = ("_bad",)
    """Attributes made by :meth:`_init_runtime`: not pickled, rebuilt after unpickling."""

    _manifest_beside_file: ClassVar[bool] = False
    """Whether a single-file root keeps its manifest in its folder (a dataset named by its index file)."""

    def __init__(self, path: str, storage: Mapping[str, Any]) -> None:
        integrity, rest = integrity_kwargs(self.format, storage)
        kwargs = storage_kwargs(self.format, rest, self.option_names())
        self.path = path
        self.storage = Storage(path, **kwargs)
        self.content_checksums: bool = integrity["checksums"]
        self.on_error: str = integrity["on_error"]
        self.max_bad_fraction: float = integrity["max_bad_fraction"]
        self._bad = _BadRecords()

    @classmethod
    def option_names(cls) -> list[str]:
        """Every option the reader accepts: its keyword-only arguments, the storage and integrity options."""
        params = inspect.signature(cls.__init__).parameters.values()
        own = [p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY]
        return sorted({*own, *STORAGE_OPTIONS, *INTEGRITY_OPTIONS, *cls._extra_options()})

    @classmethod
    def _extra_options(cls) -> tuple[str, ...]:
        """Options a base class takes from ``**storage`` itself (listed as valid in errors)."""
        return ()

    # -- damaged records ----------------------------------------------------------------------------
    def read_or_skip(self, shard: int, indices: np.ndarray) -> list[dict[str, Any] | None]:
        """:meth:`read`, with records that do not decode as ``None`` when ``on_error="skip"``.

        The fetch stage calls this instead of ``read``. A :class:`RecordError` from a read of many
        records is narrowed down by reading them one by one, so exactly the bad ones are skipped.

        Raises:
            ReaderError: a shard-level fault (never skipped), or more than ``max_bad_fraction`` of
                the records read so far were bad.
        """
        if self.on_error == "raise":
            return list(self.read(shard, indices))
        indices = np.asarray(indices, dtype=np.int64)
        try:
            rows: list[dict[str, Any] | None] = list(self.read(shard, indices))
            errors: list[RecordError] = []
        except RecordError:
            rows, errors = [], []
            for k in range(len(indices)):
                try:
                    rows.append(self.read(shard, indices[k : k + 1])[0])
                except RecordError as exc:
                    rows.append(None)
                    errors.append(exc)
        self._bad.count(self, len(indices), errors)
        return rows

    def _total_samples(self) -> int:
        return sum(s.num_samples for s in self.shards())

    # -- the manifest -------------------------------------------------------------------------------
    def _manifest_entries(self) -> list[ManifestEntry]:
        """What ``zephon index`` records: every file of the dataset with its size and samples."""
        raise NotImplementedError

    def save_manifest(self, *, checksum: bool = False, jobs: int = 8) -> str:
        """``zephon index``: write the manifest of the files as they are now; returns where it went.

        Args:
            checksum: also record each file's SHA-256 (reads every byte once; remote files go
                through the node cache), which ``verify="checksum"`` needs. A dataset whose
                manifest has checksums keeps them (recomputed) without being asked: re-indexing
                to accept a change must not silently turn verification off.
            jobs: files checksummed at once (threads).
        """
        if self.storage.is_single_file and not self._manifest_beside_file:
            return "single file: no manifest"
        entries = self._manifest_entries()
        if checksum or self._had_checksums():
            sums = file_checksums(self.storage, self._file_infos([e.rel for e in entries]), workers=max(1, jobs))
            entries = [ManifestEntry(e.rel, e.size, e.samples, e.extra, c) for e, c in zip(entries, sums)]
            where = write_manifest(self.storage, self.format, entries, beside_file=self._manifest_beside_file)
            return f"{where} (with SHA-256 checksums)"
        return write_manifest(self.storage, self.format, entries, beside_file=self._manifest_beside_file)

    def _file_infos(self, rels: list[str]) -> list[FileInfo]:
        """Size and version of each of ``rels`` (one metadata request each unless a subclass knows them)."""
        return [self.storage.info(rel) for rel in rels]

    def _had_checksums(self) -> bool:
        """Whether the manifest there now records content checksums (of data files, not an index file)."""
        try:
            old = read_manifest(self.storage, self.format, beside_file=self._manifest_beside_file)
        except ReaderError:  # unreadable or another format's: nothing to keep
            return False
        return any(e.checksum and e.extra.get("role") != "index" for e in (old or {}).values())

    def _init_runtime(self) -> None:
        """Build per-process state (called by ``__init__`` and after unpickling)."""

    @classmethod
    def _runtime_attributes(cls) -> frozenset[str]:
        """``_RUNTIME`` of this class and of every base class."""
        return frozenset(a for c in cls.__mro__ for a in c.__dict__.get("_RUNTIME", ()))

    def __getstate__(self) -> dict[str, Any]:
        runtime = self._runtime_attributes()
        return {k: v for k, v in self.__dict__.items() if k not in runtime}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._bad = _BadRecords()
        self._init_runtime()


class _BadRecords:
    """Per process and reader: records read and skipped with ``on_error="skip"``, and the threshold."""

    LOGGED = 5
    """Skipped records logged (WARNING, ``zephon.storage``) per reader and process; later ones at DEBUG."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen = 0
        self.bad = 0
        self.total: int | None = None

    def count(self, reader: StorageReader, n: int, errors: list[RecordError]) -> None:
        if errors and self.total is None:  # only once something is bad: listing counts may cost reads
            self.total = reader._total_samples()
        with self.lock:
            self.seen += n
            self.bad += len(errors)
            seen, bad = self.seen, self.bad
        for k, exc in enumerate(errors):
            level = logging.WARNING if bad - len(errors) + k < self.LOGGED else logging.DEBUG
            logger.log(level, "%s dataset %s: skipped a bad record (on_error='skip'): %s", reader.format, reader.path, exc)
        limit = reader.max_bad_fraction
        if errors and seen >= min(MIN_RECORDS_FOR_FRACTION, self.total or 0) and bad > limit * seen:
            raise ReaderError(
                f"{reader.format} dataset {reader.path!r}: {bad} of the {seen} records read so far do not decode "
                f"({bad / seen:.0%}), more than max_bad_fraction={limit:g}: the data looks mostly broken. Last: {errors[-1]}. "
                f"List every bad record with `zephon index {reader.path} --validate`; raise max_bad_fraction to go on anyway"
            )


class FileReader(StorageReader):
    """A dataset whose shards are its data files, one shard per file (Parquet, Vortex, JSON Lines).

    Subclasses set :attr:`format` and :attr:`data_files`, implement :meth:`_open_file` (and
    :meth:`shards`, :meth:`read`), and may override the hooks :meth:`_list_files`,
    :meth:`_prefetchable` and :meth:`_manifest_extra`. The listing is taken once per reader and
    pickled with it, so every worker process sees the same shards. ``_open_file`` gets its local
    copy from :meth:`_local` (which checks content checksums when asked to), and a ``shards()``
    that counts samples itself passes the counts through :meth:`_held_to_manifest`.

    Args:
        path: local path or fsspec URL of a folder or a single file.
        prefetch: after opening shard ``s`` of a remote dataset, warm the cache with the next
            ``prefetch`` shards.
        open_files: most files kept open at once per reader and process.
        manifest: hold the listing to ``_zephon_manifest.json`` when ``zephon index`` wrote one.
        storage: the remaining options (:data:`STORAGE_OPTIONS`; anything else is an error).
    """

    data_files: ClassVar[DataFiles]
    _RUNTIME: ClassVar[tuple[str, ...]] = ("_open", "_lock")

    def __init__(
        self, path: str, *, prefetch: int, open_files: int, manifest: bool, storage: Mapping[str, Any]
    ) -> None:
        super().__init__(path, storage)
        self.prefetch_ahead = int(prefetch)
        self.open_files = max(1, int(open_files))
        self.use_manifest = bool(manifest)
        self._files: list[FileInfo] | None = None
        self._manifest: dict[str, ManifestEntry] | None = None
        self._checksums: dict[str, str] = {}

    def _init_runtime(self) -> None:
        self._open: OrderedDict[int, tuple[Any, Release]] = OrderedDict()
        # Reentrant: a subclass may hold it around a read while opening the file through _opened.
        self._lock = threading.RLock()

    def _names(self, value: Sequence[str] | None, option: str) -> list[str] | None:
        """Validate a ``columns=`` / ``fields=`` option: None, or a list of names (a bare string is an error)."""
        if value is None:
            return None
        if isinstance(value, str) or not all(isinstance(c, str) for c in value):
            raise ConfigError(f"{self.format}: {option} must be a list of names, got {value!r}")
        return list(value)

    # -- listing ------------------------------------------------------------------------------------
    def files(self) -> list[FileInfo]:
        """The data files, sorted by relative path (listed once, then fixed for this reader)."""
        if self._files is None:
            files, manifest = self._list_files()
            if self.content_checksums:
                self._checksums = checksums_of(self.storage, manifest, [f.rel for f in files])
            self._files, self._manifest = files, manifest
        return self._files

    def _held_to_manifest(self, shards: list[ShardInfo]) -> list[ShardInfo]:
        """``shards``, after checking their sample counts against the manifest (when there is one)."""
        if self._manifest is not None:
            check_counts(self.storage, ((s.id, s.num_samples) for s in shards), self._manifest)
        return shards

    def _list_files(self) -> tuple[list[FileInfo], dict[str, ManifestEntry] | None]:
        """List the data files and the manifest they were checked against (None without one)."""
        return list_data_files(
            self.storage,
            self.data_files.accepts,
            self.format,
            use_manifest=self.use_manifest,
            what=self.data_files.what,
        )

    def _name(self, i: int) -> str:
        """Shard ``i``'s URL: what every error about it starts with."""
        return self.storage.url_of(self.files()[i].rel)

    def _check_shard(self, shard: int) -> list[FileInfo]:
        """The files, after checking that ``shard`` is one of them."""
        files = self.files()
        if not 0 <= shard < len(files):
            raise ReaderError(f"{self.path}: shard {shard} does not exist ({len(files)} files)")
        return files

    # -- the manifest -------------------------------------------------------------------------------
    def _manifest_extra(self, i: int) -> dict[str, Any]:
        """Format details recorded for shard ``i`` in the manifest (e.g. Parquet row-group sizes)."""
        return {}

    def _manifest_entries(self) -> list[ManifestEntry]:
        """Every data file with its size, samples and :meth:`_manifest_extra` (a single file: see ``save_manifest``)."""
        shards = self.shards()
        return [
            ManifestEntry(f.rel, f.size, s.num_samples, self._manifest_extra(i))
            for i, (f, s) in enumerate(zip(self.files(), shards))
        ]

    def _file_infos(self, rels: list[str]) -> list[FileInfo]:
        """From the listing: no request per file."""
        listed = {f.rel: f for f in self.files()}
        return [listed[rel] if rel in listed else self.storage.info(rel) for rel in rels]

    # -- open files ---------------------------------------------------------------------------------
    def _local(self, i: int) -> LocalFile:
        """A local path of shard ``i``'s file (:meth:`Storage.open_local`), checked with ``verify="checksum"``."""
        info = self.files()[i]
        if self.content_checksums:
            return open_verified(self.storage, info, self._checksums[info.rel])
        return self.storage.open_local(info.rel, info)

    def _open_file(self, i: int) -> tuple[Any, Release]:
        """Open shard ``i``: its handle and how to close it. Called under the reader's lock."""
        raise NotImplementedError

    def _opened(self, i: int) -> Any:
        """Shard ``i``'s handle from :meth:`_open_file`, kept in an LRU of ``open_files`` entries.

        Opening a file (a footer parse, a cache pin, a decompression) costs far more than one read,
        and a shuffled fetch keeps returning to the same files. Opening also warms the cache with
        the next ``prefetch`` files of a remote dataset.
        """
        with self._lock:
            hit = self._open.get(i)
            if hit is not None:
                self._open.move_to_end(i)
                return hit[0]
            handle, release = self._open_file(i)
            self._open[i] = (handle, release)
            while len(self._open) > self.open_files:
                _, (_, old) = self._open.popitem(last=False)
                old()
            if self.prefetch_ahead > 0 and not self.storage.is_local:
                files = self.files()
                ahead = (files[(i + k) % len(files)] for k in range(1, self.prefetch_ahead + 1))
                self.storage.prefetch(f for f in ahead if self._prefetchable(f.rel))
            return handle

    def _prefetchable(self, rel: str) -> bool:
        """Whether downloading ``rel`` ahead helps (not for files that must be decompressed first)."""
        return True

    def prefetch(self, shards: Sequence[int]) -> None:
        """Warm the node cache with these shards' files (remote data) in the background."""
        files = self.files()
        self.storage.prefetch(files[s] for s in shards if self._prefetchable(files[s].rel))

    def stop_prefetch(self) -> None:
        """Stop the prefetch threads (a later prefetch starts them again)."""
        self.storage.close()

    def close(self) -> None:
        """Close every open file and stop the prefetch threads."""
        with self._lock:
            for _, release in self._open.values():
                release()
            self._open.clear()
        self.storage.close()


def in_request_order(rows: list[dict[str, Any]], inverse: np.ndarray, requested: int) -> list[dict[str, Any]]:
    """Rows read once per distinct index, handed back in request order.

    Args:
        rows: one row per distinct index, in sorted index order (``np.unique``).
        inverse: ``np.unique(indices, return_inverse=True)[1]``.
        requested: how many indices were asked for.

    Repeats get their own dict, so a downstream operator mutating one cannot change the other.
    """
    order = np.asarray(inverse).reshape(-1).tolist()
    if len(rows) == requested:
        return [rows[j] for j in order]
    return [dict(rows[j]) for j in order]
