"""Storage for readers: fsspec file systems, a node-local shard cache, retries and prefetching.

Public names (plugins import only these):

* :class:`Storage` — a dataset root on any fsspec file system; ``open_local(rel)`` gives a local
  path (in place for local data, a shared cached copy for remote data).
* :class:`ShardCache`, :class:`CachedFile`, :func:`cache_key` — the byte-bounded, multi-process LRU
  of whole files behind it.
* :func:`call_with_retry`, :func:`is_permanent_error`, :func:`describe_error` — how storage faults
  are retried or reported.
* :func:`list_data_files`, :func:`read_manifest`, :func:`write_manifest`, :func:`check_listing` — the ``_zephon_manifest.json``
  that ``zephon index`` writes so a folder dataset knows which files it must contain.
* :class:`MappedFiles` — read-only memory maps of a dataset's files (decompressed through the cache
  when a reader gives a codec), kept open in a per-process LRU.
* :class:`ByteLRU` — a thread-safe LRU bounded by bytes and entries for decoded state.
* :func:`default_cache_dir`, :func:`default_cache_bytes`, :func:`parse_bytes` — configuration from
  options and the ``ZEPHON_CACHE_DIR`` / ``ZEPHON_CACHE_BYTES`` environment variables.
"""

from __future__ import annotations

from zephon_core.storage.cache import CachedFile, ShardCache, cache_key
from zephon_core.storage.config import DEFAULT_CACHE_BYTES, default_cache_bytes, default_cache_dir, parse_bytes
from zephon_core.storage.location import FileInfo, LocalFile, Storage
from zephon_core.storage.lru import ByteLRU
from zephon_core.storage.manifest import (
    MANIFEST,
    ManifestEntry,
    check_listing,
    list_data_files,
    read_manifest,
    write_manifest,
)
from zephon_core.storage.mapped import MappedFiles
from zephon_core.storage.retry import call_with_retry, describe_error, is_permanent_error

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


def split_storage_options(options: dict[str, object]) -> tuple[dict[str, object], dict[str, object]]:
    """Split reader options into (storage options, the reader's own options)."""
    storage = {k: v for k, v in options.items() if k in STORAGE_OPTIONS}
    rest = {k: v for k, v in options.items() if k not in STORAGE_OPTIONS}
    return storage, rest


__all__ = [
    "DEFAULT_CACHE_BYTES",
    "ByteLRU",
    "MappedFiles",
    "MANIFEST",
    "STORAGE_OPTIONS",
    "CachedFile",
    "FileInfo",
    "LocalFile",
    "ManifestEntry",
    "ShardCache",
    "Storage",
    "cache_key",
    "call_with_retry",
    "check_listing",
    "default_cache_bytes",
    "default_cache_dir",
    "describe_error",
    "is_permanent_error",
    "list_data_files",
    "parse_bytes",
    "read_manifest",
    "split_storage_options",
    "write_manifest",
]
