"""Base classes for readers whose data lives under one :class:`Storage` root.

Every format plugin used to repeat the same plumbing: split the storage options from its own, open a
:class:`Storage`, pickle to its configuration and reopen files lazily in each worker process, list
its data files (held to the ``zephon index`` manifest), keep a few files open, warm the cache ahead
of the reader and hand repeated indices back as independent dicts. The copies drifted (three
readers raised ``TypeError`` for an unknown option, two ``ConfigError``), so the plumbing lives here
once and a plugin writes only what its format needs:

* :class:`StorageReader` — options, the storage root and pickling; the base of both kinds below.
* :class:`FileReader` — one shard per data file (Parquet, Vortex, JSON Lines): listing, the
  manifest, open files, prefetching. :class:`DataFiles` says which files are data and detects a
  dataset from a listing.
* :class:`~zephon_core.storage.layout.LayoutReader` — datasets described by one index file
  (LitData, Mosaic MDS).
"""

from __future__ import annotations

import inspect
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from zephon_core.errors import ConfigError, ReaderError
from zephon_core.storage.location import FileInfo, Storage
from zephon_core.storage.manifest import ManifestEntry, list_data_files, write_manifest
from zephon_core.work.readers import Reader

STORAGE_OPTIONS = (
    "storage_options",
    "cache_dir",
    "cache_bytes",
    "retries",
    "backoff",
    "prefetch_workers",
    "lock_timeout",
)
"""Reader options that configure :class:`Storage`; readers pass these through unchanged."""

Release = Callable[[], None]
"""Closes what a reader opened for one shard (a file descriptor, a pinned cache entry, ...)."""


def split_storage_options(options: Mapping[str, object]) -> tuple[dict[str, object], dict[str, object]]:
    """Split reader options into (storage options, the reader's own options)."""
    storage = {k: v for k, v in options.items() if k in STORAGE_OPTIONS}
    rest = {k: v for k, v in options.items() if k not in STORAGE_OPTIONS}
    return storage, rest


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
    to ``super().__init__``: storage options configure :attr:`storage`, anything else is a
    :class:`ConfigError` listing the valid options (the subclass's keyword-only arguments plus
    :data:`STORAGE_OPTIONS`).

    Readers are pickled into every worker process, so per-process state (open files, locks, caches,
    compiled decoders) is built by :meth:`_init_runtime` and left out of the pickle: list those
    attributes in ``_RUNTIME`` and call ``self._init_runtime()`` at the end of ``__init__``. Each
    class lists only its own; the lists of its bases count too.
    """

    _RUNTIME: ClassVar[tuple[str, ...]] = ()
    """Attributes made by :meth:`_init_runtime`: not pickled, rebuilt after unpickling."""

    def __init__(self, path: str, storage: Mapping[str, Any]) -> None:
        kwargs = storage_kwargs(self.format, storage, self.option_names())
        self.path = path
        self.storage = Storage(path, **kwargs)

    @classmethod
    def option_names(cls) -> list[str]:
        """Every option the reader accepts: its keyword-only arguments and the storage options."""
        params = inspect.signature(cls.__init__).parameters.values()
        own = [p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY]
        return sorted({*own, *STORAGE_OPTIONS})

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
        self._init_runtime()


class FileReader(StorageReader):
    """A dataset whose shards are its data files, one shard per file (Parquet, Vortex, JSON Lines).

    Subclasses set :attr:`format` and :attr:`data_files`, implement :meth:`_open_file` (and
    :meth:`shards`, :meth:`read`), and may override the hooks :meth:`_list_files`,
    :meth:`_prefetchable` and :meth:`_manifest_extra`. The listing is taken once per reader and
    pickled with it, so every worker process sees the same shards.

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
            self._files, self._manifest = self._list_files()
        return self._files

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

    def save_manifest(self) -> str:
        """``zephon index``: write the manifest of the files as listed now; returns where it went.

        A single-file dataset has no folder to hold a manifest; the answer then says so.
        """
        shards = self.shards()
        entries = [
            ManifestEntry(f.rel, f.size, s.num_samples, self._manifest_extra(i))
            for i, (f, s) in enumerate(zip(self.files(), shards))
        ]
        if self.storage.is_single_file:
            return "single file: no manifest"
        return write_manifest(self.storage, self.format, entries)

    # -- open files ---------------------------------------------------------------------------------
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
                ahead = (files[(i + k) % len(files)].rel for k in range(1, self.prefetch_ahead + 1))
                self.storage.prefetch(r for r in ahead if self._prefetchable(r))
            return handle

    def _prefetchable(self, rel: str) -> bool:
        """Whether downloading ``rel`` ahead helps (not for files that must be decompressed first)."""
        return True

    def prefetch(self, shards: Sequence[int]) -> None:
        """Warm the node cache with these shards' files (remote data) in the background."""
        files = self.files()
        self.storage.prefetch(files[s].rel for s in shards if self._prefetchable(files[s].rel))

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
