"""``zephon index PATH`` for JSON Lines: build every file's ``.zidx`` and write ``_zephon_manifest.json``.

Stale indexes are rebuilt, valid ones kept (the index format is :mod:`zephon_jsonl.zidx`). The
manifest then records which files belong to the dataset, so one that later goes missing is an error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from zephon_jsonl.reader import JsonlReader


def build_index(
    path: str,
    *,
    checksum: bool = False,
    jobs: int = 1,
    progress: Callable[[int, int], None] | None = None,
    **options: Any,
) -> str:
    """Index every JSON Lines file under ``path``, write the manifest; return a one-line summary.

    Args:
        path: the dataset folder, file or fsspec URL.
        checksum: record each file's SHA-256 too (for the reader option ``verify="checksum"``).
        jobs: files indexed (and checksummed) at once, in threads; the files written do not depend on it.
        progress: called as ``progress(done, total)`` after each file is indexed.
        options: reader options.
    """
    options.setdefault("rebuild_stale", True)
    reader = JsonlReader(path, manifest=False, **options)
    reader.build_indexes(jobs=jobs, progress=progress)
    where = reader.save_manifest(checksum=checksum, jobs=jobs)
    shards = reader.shards()
    built = reader.built_indexes
    return (
        f"jsonl: {len(shards)} files, {sum(s.num_samples for s in shards)} records; "
        f"{built} index(es) built, {len(shards) - built} up to date; {where}"
    )
