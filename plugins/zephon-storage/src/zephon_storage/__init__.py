"""Storage for readers: fsspec file systems, a node-local shard cache, retries and prefetching.

The distribution zephon-storage, which every file-based reader plugin depends on; the kernel does
not (it only detects formats and reads through the ``Reader`` contract). It also brings the
``zephon show``, ``zephon inspect`` and ``zephon index`` commands (:mod:`zephon_storage.plugin`)
and the reader test kit, :mod:`zephon_storage.testing`.

Public names (plugins import only these):

* :class:`Storage` — a dataset root on any fsspec file system; ``open_local(rel)`` gives a local
  path (in place for local data, a shared cached copy for remote data).
* :class:`ShardCache`, :class:`CachedFile`, :func:`cache_key` — the byte-bounded, multi-process LRU
  of whole files behind it.
* :func:`call_with_retry`, :class:`RetryPolicy`, :func:`is_permanent_error`, :func:`describe_error`,
  :class:`StallError`, :class:`TruncatedReadError` — how storage faults are retried (with a
  per-read timeout and a deadline) or reported; ``Storage.call`` applies a root's policy.
* :class:`RemoteFile` — a remote object as a seekable file of retried range reads (``open_remote``).
* :func:`list_data_files`, :func:`read_manifest`, :func:`write_manifest`, :func:`check_listing`,
  :func:`check_counts`, :func:`checksums_of` — the ``_zephon_manifest.json`` that ``zephon index``
  writes so a dataset knows which files (sizes, sample counts, optionally checksums) it must contain.
* :func:`checksum_of`, :func:`check_file`, :func:`file_checksums`, :func:`open_verified` — content
  checksums (``zephon index --checksum``, reader option ``verify="checksum"``).
* :func:`validate`, :func:`validate_shard`, :class:`Validation`, :class:`BadRecord` — ``zephon index
  --validate``: decode every record and list the bad ones.
* :class:`MappedFiles` — read-only memory maps of a dataset's files (decompressed through the cache
  when a reader gives a codec), kept open in a per-process LRU.
* :class:`ByteLRU` — a thread-safe LRU bounded by bytes and entries for decoded state.
* :func:`default_cache_dir`, :func:`default_cache_bytes`, :func:`parse_bytes` — configuration from
  options and the ``ZEPHON_CACHE_DIR`` / ``ZEPHON_CACHE_BYTES`` environment variables.

Reader base classes (a plugin writes only what its format needs):

* :class:`StorageBacked` — the reader capability "shards are files under a storage root" that the
  commands ask for (sizes, URLs); every :class:`StorageReader` has it.
* :class:`StorageReader` — options (:data:`STORAGE_OPTIONS`, :func:`storage_kwargs`: an unknown
  option is a ``ConfigError`` naming the reader and the valid options), the :class:`Storage` root,
  pickling to configuration with per-process state rebuilt in each worker, and damaged data
  (:data:`INTEGRITY_OPTIONS`: ``verify``, ``on_error``, ``max_bad_fraction``; :meth:`read_or_skip`).
* :class:`FileReader` — one shard per data file: listing held to the manifest, open-file LRU,
  prefetching, ``zephon index`` manifests; :class:`DataFiles` recognises data files by suffix and
  detects a dataset; :func:`in_request_order` hands rows back in request order.
* :class:`LayoutReader` — datasets described by one ``index.json`` (:data:`INDEX_FILE`):
  :func:`detect_index`, :func:`parse_index_json`, :func:`index_path`, :func:`check_sample_indices`.
* :class:`IndexedFileReader` — a :class:`FileReader` whose files each have a sidecar index
  (``<file>.zidx``: JSON Lines, WebDataset): where it is kept, download, freshness against the data
  file (:class:`SourceIdentity`, :func:`identity_of`, :func:`local_identity`), adoption, the
  stale-index error; :func:`write_sidecar`, :func:`read_sidecar_header`, :func:`check_sidecar_size`
  frame the file (magic, version, JSON header) and write it atomically with the data's permissions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "BadRecord": "zephon_storage.validation",
    "ByteLRU": "zephon_storage.lru",
    "CachedFile": "zephon_storage.cache",
    "ChecksumMismatch": "zephon_storage.integrity",
    "DEFAULT_CACHE_BYTES": "zephon_storage.config",
    "DEFAULT_MAX_BAD_FRACTION": "zephon_storage.readers",
    "DataFiles": "zephon_storage.readers",
    "FileInfo": "zephon_storage.location",
    "FileReader": "zephon_storage.readers",
    "IDENTITY_PROBE": "zephon_storage.sidecar",
    "INDEX_FILE": "zephon_storage.layout",
    "INTEGRITY_OPTIONS": "zephon_storage.readers",
    "IndexedFileReader": "zephon_storage.sidecar",
    "LayoutReader": "zephon_storage.layout",
    "LocalFile": "zephon_storage.location",
    "MANIFEST": "zephon_storage.manifest",
    "ManifestEntry": "zephon_storage.manifest",
    "MappedFiles": "zephon_storage.mapped",
    "READ_BLOCK": "zephon_storage.location",
    "RemoteFile": "zephon_storage.location",
    "RetryPolicy": "zephon_storage.retry",
    "STORAGE_OPTIONS": "zephon_storage.readers",
    "ShardCache": "zephon_storage.cache",
    "SidecarIndex": "zephon_storage.sidecar",
    "SourceIdentity": "zephon_storage.sidecar",
    "StallError": "zephon_storage.retry",
    "Storage": "zephon_storage.location",
    "StorageBacked": "zephon_storage.location",
    "StorageReader": "zephon_storage.readers",
    "TruncatedReadError": "zephon_storage.retry",
    "Validation": "zephon_storage.validation",
    "cache_key": "zephon_storage.cache",
    "call_with_retry": "zephon_storage.retry",
    "check_counts": "zephon_storage.manifest",
    "check_file": "zephon_storage.integrity",
    "check_listing": "zephon_storage.manifest",
    "check_sample_indices": "zephon_storage.layout",
    "check_sidecar_size": "zephon_storage.sidecar",
    "checksum_of": "zephon_storage.integrity",
    "checksums_of": "zephon_storage.manifest",
    "default_cache_bytes": "zephon_storage.config",
    "default_cache_dir": "zephon_storage.config",
    "describe_error": "zephon_storage.retry",
    "detect_index": "zephon_storage.layout",
    "file_checksums": "zephon_storage.integrity",
    "identity_of": "zephon_storage.sidecar",
    "in_request_order": "zephon_storage.readers",
    "index_path": "zephon_storage.layout",
    "integrity_kwargs": "zephon_storage.readers",
    "is_permanent_error": "zephon_storage.retry",
    "is_private_path": "zephon_storage.readers",
    "list_data_files": "zephon_storage.manifest",
    "local_identity": "zephon_storage.sidecar",
    "open_verified": "zephon_storage.integrity",
    "parse_bytes": "zephon_storage.config",
    "parse_index_json": "zephon_storage.layout",
    "read_manifest": "zephon_storage.manifest",
    "read_sidecar_header": "zephon_storage.sidecar",
    "split_storage_options": "zephon_storage.readers",
    "storage_kwargs": "zephon_storage.readers",
    "validate": "zephon_storage.validation",
    "validate_shard": "zephon_storage.validation",
    "write_manifest": "zephon_storage.manifest",
    "write_sidecar": "zephon_storage.sidecar",
}
"""Where each public name is defined. Resolved lazily (module ``__getattr__``), so importing the
package, which every plugin manager does through :mod:`zephon_storage.plugin`, imports neither fsspec
nor numpy until a name is used."""

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'zephon_storage' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:
    from zephon_storage.cache import CachedFile, ShardCache, cache_key
    from zephon_storage.config import DEFAULT_CACHE_BYTES, default_cache_bytes, default_cache_dir, parse_bytes
    from zephon_storage.integrity import ChecksumMismatch, check_file, checksum_of, file_checksums, open_verified
    from zephon_storage.layout import (
        INDEX_FILE,
        LayoutReader,
        check_sample_indices,
        detect_index,
        index_path,
        parse_index_json,
    )
    from zephon_storage.location import READ_BLOCK, FileInfo, LocalFile, RemoteFile, Storage, StorageBacked
    from zephon_storage.lru import ByteLRU
    from zephon_storage.manifest import (
        MANIFEST,
        ManifestEntry,
        check_counts,
        check_listing,
        checksums_of,
        list_data_files,
        read_manifest,
        write_manifest,
    )
    from zephon_storage.mapped import MappedFiles
    from zephon_storage.readers import (
        DEFAULT_MAX_BAD_FRACTION,
        INTEGRITY_OPTIONS,
        STORAGE_OPTIONS,
        DataFiles,
        FileReader,
        StorageReader,
        in_request_order,
        integrity_kwargs,
        is_private_path,
        split_storage_options,
        storage_kwargs,
    )
    from zephon_storage.retry import (
        RetryPolicy,
        StallError,
        TruncatedReadError,
        call_with_retry,
        describe_error,
        is_permanent_error,
    )
    from zephon_storage.sidecar import (
        IDENTITY_PROBE,
        IndexedFileReader,
        SidecarIndex,
        SourceIdentity,
        check_sidecar_size,
        identity_of,
        local_identity,
        read_sidecar_header,
        write_sidecar,
    )
    from zephon_storage.validation import BadRecord, Validation, validate, validate_shard
