"""``_zephon_manifest.json``: the list of files a dataset must contain, written by ``zephon index``.

A plain folder of Parquet, Vortex or JSON Lines files does not record which files belong to it.
If a file goes missing, the folder is simply a smaller dataset, and a run would train on different
data without noticing. LitData and MDS list their chunks in ``index.json``, but a chunk deleted
together with its entry (or an ``index.json`` rewritten by a partial re-run) is the same silent
loss. ``zephon index PATH`` therefore writes a manifest beside the data for every format: every file
with its size and sample count (plus format details such as row-group sizes, and with
``--checksum`` a SHA-256 of its content, see :mod:`~zephon_storage.integrity`). A reader that
finds a manifest holds the listing to it. A missing, extra or resized file, or a sample count that
disagrees, is then an error naming the file. The recorded counts also spare remote datasets one
footer read per file at listing time.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from zephon_core import ReaderError
from zephon_storage.location import FileInfo, Storage
from zephon_storage.retry import call_with_retry

MANIFEST = "_zephon_manifest.json"
VERSION = 1


@dataclass(frozen=True)
class ManifestEntry:
    """One file of the dataset: relative path, size in bytes, samples, format-specific details.

    ``checksum`` is ``"sha256:<hex>"`` of the content when ``zephon index --checksum`` wrote it.
    A format's own index file (LitData's or MDS's ``index.json``) is an entry with 0 samples.
    """

    rel: str
    size: int
    samples: int
    extra: dict[str, Any] = field(default_factory=dict)
    checksum: str | None = None


def read_manifest(storage: Storage, fmt: str, *, beside_file: bool = False) -> dict[str, ManifestEntry] | None:
    """The manifest of the dataset root, or None if there is none.

    A single-file root has none, unless ``beside_file``: a dataset named by its index file (a
    LitData or MDS ``index.json``) keeps its manifest in that file's folder.
    """
    if storage.is_single_file and not beside_file:
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
            e["path"]: ManifestEntry(
                e["path"], int(e["size"]), int(e["samples"]), dict(e.get("extra") or {}), e.get("checksum") or None
            )
            for e in doc["files"]
        }
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ReaderError(
            f"{url}: not a valid manifest ({type(exc).__name__}: {exc}); rebuild it with `zephon index`"
        ) from None


def write_manifest(storage: Storage, fmt: str, entries: list[ManifestEntry], *, beside_file: bool = False) -> str:
    """Write the manifest at the dataset root (atomically where the file system allows); returns its URL.

    ``beside_file``: as for :func:`read_manifest`.
    """
    if storage.is_single_file and not beside_file:
        raise ReaderError(f"{storage.url}: a single-file dataset has no manifest")

    def entry(e: ManifestEntry) -> dict[str, Any]:
        out: dict[str, Any] = {"path": e.rel, "size": e.size, "samples": e.samples, "extra": e.extra}
        if e.checksum:
            out["checksum"] = e.checksum
        return out

    doc = {"format": fmt, "version": VERSION, "files": [entry(e) for e in entries]}
    data = json.dumps(doc, indent=1).encode()
    path, url = storage.full_path(MANIFEST), storage.url_of(MANIFEST)
    tmp = storage.full_path(f".{MANIFEST}.tmp")

    def put() -> None:
        storage.fs.pipe_file(tmp, data)
        storage.fs.mv(tmp, path)

    call_with_retry(put, what=url, attempts=storage.retries, base_delay=storage.backoff)
    mode = shared_mode(storage.full_path(e.rel) for e in entries) if storage.is_local else None
    if mode is not None:
        with contextlib.suppress(OSError):  # the manifest is written; its mode is a courtesy
            os.chmod(path, mode)
    return url


def shared_mode(paths: Iterable[str]) -> int | None:
    """The permission bits an index file gets: those every one of the data files ``paths`` has.

    An index or manifest must be readable by whoever may read the data (a team-readable dataset
    with an owner-only manifest cannot be opened by the team) but no more (it lists file names and
    sizes). Execute bits are dropped. None when no file can be inspected.
    """
    mode = 0o666
    seen = False
    for p in paths:
        try:
            mode &= stat.S_IMODE(os.stat(p).st_mode)
        except OSError:
            continue
        seen = True
    return mode if seen else None


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


def check_counts(
    storage: Storage, counts: Iterable[tuple[str, int]], manifest: dict[str, ManifestEntry], unit: str = "samples"
) -> None:
    """Raise a ReaderError naming the first file whose sample count is not the manifest's.

    The size check of :func:`check_listing` misses a file rewritten to the same size, or an index
    rebuilt after a file changed; a count that moved means the pointers of a run would address other
    samples.
    """
    for rel, n in counts:
        entry = manifest.get(rel)
        if entry is not None and entry.samples != n:
            raise ReaderError(
                f"{storage.url_of(rel)}: has {n} {unit}, {MANIFEST} says {entry.samples}: the file changed; "
                f"if on purpose, rebuild {MANIFEST} with `zephon index {storage.url}`"
            )


def checksums_of(storage: Storage, manifest: dict[str, ManifestEntry] | None, rels: Iterable[str]) -> dict[str, str]:
    """The recorded checksum of each of ``rels``, for ``verify="checksum"``; an error if one has none.

    Checked when a reader is built, so a run cannot start believing it verifies what it cannot.
    """
    hint = f"run `zephon index {storage.url} --checksum` to record checksums"
    if storage.is_single_file and manifest is None:
        raise ReaderError(
            f"{storage.url}: verify='checksum' needs a folder dataset ({MANIFEST} lives in the folder); {hint}"
        )
    if manifest is None:
        raise ReaderError(f"{storage.url}: verify='checksum' but there is no {MANIFEST}; {hint}")
    out = {}
    for rel in rels:
        entry = manifest.get(rel)
        if entry is None or not entry.checksum:
            raise ReaderError(f"{storage.url_of(rel)}: verify='checksum' but {MANIFEST} has no checksum for it; {hint}")
        out[rel] = entry.checksum
    return out


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
