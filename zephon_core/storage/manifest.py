"""``_zephon_manifest.json``: the list of files a folder dataset must contain, written by ``zephon index``.

A plain folder of Parquet, Vortex or JSON Lines files does not record which files belong to it.
If a file goes missing, the folder is simply a smaller dataset, and a run would train on different
data without noticing. ``zephon index PATH`` therefore writes a manifest beside the data: every file
with its size and sample count (plus format details such as row-group sizes). A reader that finds
a manifest holds the listing to it. A missing, extra or resized file is then an error naming the
file. The recorded counts also spare remote datasets one footer read per file at listing time.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from zephon_core.errors import ReaderError
from zephon_core.storage.location import FileInfo, Storage
from zephon_core.storage.retry import call_with_retry

MANIFEST = "_zephon_manifest.json"
VERSION = 1


@dataclass(frozen=True)
class ManifestEntry:
    """One file of the dataset: relative path, size in bytes, samples, format-specific details."""

    rel: str
    size: int
    samples: int
    extra: dict[str, Any] = field(default_factory=dict)


def read_manifest(storage: Storage, fmt: str) -> dict[str, ManifestEntry] | None:
    """The manifest of the dataset root, or None if there is none (or the root is a single file)."""
    if storage.is_single_file:
        return None
    path = storage.full_path(MANIFEST)
    url = storage.url_of(MANIFEST)
    try:
        raw = call_with_retry(
            lambda: storage.fs.cat_file(path), what=url, attempts=storage.retries, base_delay=storage.backoff
        )
    except ReaderError as exc:
        if isinstance(exc.__cause__, FileNotFoundError):
            return None
        raise
    try:
        doc = json.loads(raw)
        if doc.get("format") != fmt:
            raise ReaderError(f"{url}: manifest is for format {doc.get('format')!r}, not {fmt!r}")
        return {
            e["path"]: ManifestEntry(e["path"], int(e["size"]), int(e["samples"]), dict(e.get("extra") or {}))
            for e in doc["files"]
        }
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ReaderError(
            f"{url}: not a valid manifest ({type(exc).__name__}: {exc}); rebuild it with `zephon index`"
        ) from None


def write_manifest(storage: Storage, fmt: str, entries: list[ManifestEntry]) -> str:
    """Write the manifest at the dataset root (atomically where the file system allows); returns its URL."""
    if storage.is_single_file:
        raise ReaderError(f"{storage.url}: a single-file dataset has no manifest")
    doc = {
        "format": fmt,
        "version": VERSION,
        "files": [{"path": e.rel, "size": e.size, "samples": e.samples, "extra": e.extra} for e in entries],
    }
    data = json.dumps(doc, indent=1).encode()
    path, url = storage.full_path(MANIFEST), storage.url_of(MANIFEST)
    tmp = storage.full_path(f".{MANIFEST}.tmp")

    def put() -> None:
        storage.fs.pipe_file(tmp, data)
        storage.fs.mv(tmp, path)

    call_with_retry(put, what=url, attempts=storage.retries, base_delay=storage.backoff)
    return url


def check_listing(storage: Storage, files: list[FileInfo], manifest: dict[str, ManifestEntry]) -> None:
    """Raise a ReaderError naming the first file that is missing, extra or resized versus the manifest."""
    listed = {f.rel: f for f in files}
    hint = f"; if the dataset changed on purpose, rebuild {MANIFEST} with `zephon index {storage.url}`"
    missing = sorted(set(manifest) - set(listed))
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise ReaderError(f"{storage.url_of(missing[0])}: listed in {MANIFEST} but missing{more}{hint}")
    extra = sorted(set(listed) - set(manifest))
    if extra:
        raise ReaderError(f"{storage.url_of(extra[0])}: not listed in {MANIFEST}{hint}")
    for rel, entry in manifest.items():
        if listed[rel].size != entry.size:
            raise ReaderError(
                f"{storage.url_of(rel)}: has {listed[rel].size} bytes, {MANIFEST} says {entry.size}: the file changed{hint}"
            )


def list_data_files(
    storage: Storage,
    is_data_file: Any,
    fmt: str,
    *,
    use_manifest: bool = True,
    what: str = "data files",
) -> tuple[list[FileInfo], dict[str, ManifestEntry] | None]:
    """A folder dataset's data files, held to its manifest when ``zephon index`` wrote one.

    Returns the sorted files and the manifest (or None). No matching file, or a listing that
    disagrees with the manifest, is a :class:`ReaderError` naming the dataset or the file.
    """
    files = storage.list_files(is_data_file)
    if not files:
        raise ReaderError(f"{storage.url_of('')}: no {what} found")
    manifest = read_manifest(storage, fmt) if use_manifest else None
    if manifest is not None:
        check_listing(storage, files, manifest)
    return files, manifest
