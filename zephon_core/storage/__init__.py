"""Storage for readers: fsspec file systems, a node-local shard cache, retries and prefetching.

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

from zephon_core.storage.cache import CachedFile, ShardCache, cache_key
from zephon_core.storage.config import DEFAULT_CACHE_BYTES, default_cache_bytes, default_cache_dir, parse_bytes
from zephon_core.storage.integrity import ChecksumMismatch, check_file, checksum_of, file_checksums, open_verified
from zephon_core.storage.layout import (
    INDEX_FILE,
    LayoutReader,
    check_sample_indices,
    detect_index,
    index_path,
    parse_index_json,
)
from zephon_core.storage.location import READ_BLOCK, FileInfo, LocalFile, RemoteFile, Storage
from zephon_core.storage.lru import ByteLRU
from zephon_core.storage.manifest import (
    MANIFEST,
    ManifestEntry,
    check_counts,
    check_listing,
    checksums_of,
    list_data_files,
    read_manifest,
    write_manifest,
)
from zephon_core.storage.mapped import MappedFiles
from zephon_core.storage.readers import (
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
from zephon_core.storage.retry import (
    RetryPolicy,
    StallError,
    TruncatedReadError,
    call_with_retry,
    describe_error,
    is_permanent_error,
)
from zephon_core.storage.sidecar import (
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
from zephon_core.storage.validate import BadRecord, Validation, validate, validate_shard

__all__ = [
    "DEFAULT_CACHE_BYTES",
    "DEFAULT_MAX_BAD_FRACTION",
    "INTEGRITY_OPTIONS",
    "BadRecord",
    "ChecksumMismatch",
    "Validation",
    "check_counts",
    "check_file",
    "checksum_of",
    "checksums_of",
    "file_checksums",
    "integrity_kwargs",
    "open_verified",
    "validate",
    "validate_shard",
    "INDEX_FILE",
    "ByteLRU",
    "MappedFiles",
    "MANIFEST",
    "STORAGE_OPTIONS",
    "CachedFile",
    "DataFiles",
    "FileInfo",
    "FileReader",
    "LayoutReader",
    "LocalFile",
    "ManifestEntry",
    "ShardCache",
    "Storage",
    "StorageReader",
    "cache_key",
    "call_with_retry",
    "READ_BLOCK",
    "RemoteFile",
    "RetryPolicy",
    "StallError",
    "TruncatedReadError",
    "check_listing",
    "check_sample_indices",
    "default_cache_bytes",
    "default_cache_dir",
    "describe_error",
    "detect_index",
    "in_request_order",
    "index_path",
    "is_permanent_error",
    "is_private_path",
    "list_data_files",
    "parse_bytes",
    "parse_index_json",
    "read_manifest",
    "split_storage_options",
    "storage_kwargs",
    "write_manifest",
    "IDENTITY_PROBE",
    "IndexedFileReader",
    "SidecarIndex",
    "SourceIdentity",
    "check_sidecar_size",
    "identity_of",
    "local_identity",
    "read_sidecar_header",
    "write_sidecar",
]
