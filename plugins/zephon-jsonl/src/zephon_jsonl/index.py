"""``zephon index PATH`` for JSON Lines: build every file's ``.zidx`` and write ``_zephon_manifest.json``.

Stale indexes are rebuilt, valid ones kept (the index format is :mod:`zephon_jsonl.zidx`). The
manifest then records which files belong to the dataset, so one that later goes missing is an error.
"""

from __future__ import annotations

from typing import Any

from zephon_jsonl.reader import JsonlReader


def build_index(path: str, *, checksum: bool = False, **options: Any) -> str:
    """Index every JSON Lines file under ``path``, write the manifest; return a one-line summary.

    ``checksum``: record each file's SHA-256 too (for the reader option ``verify="checksum"``).
    """
    options.setdefault("rebuild_stale", True)
    reader = JsonlReader(path, manifest=False, **options)
    where = reader.save_manifest(checksum=checksum)
    shards = reader.shards()
    built = reader.built_indexes
    return (
        f"jsonl: {len(shards)} files, {sum(s.num_samples for s in shards)} records; "
        f"{built} index(es) built, {len(shards) - built} up to date; {where}"
    )
