"""``zephon index PATH`` for WebDataset: build every tar's ``.zidx`` and write ``_zephon_manifest.json``.

Indexing reads tar headers only. Stale indexes are rebuilt, valid ones kept. The manifest then
records which tars belong to the dataset (size and sample count each), so a tar that later goes
missing, is cut short or is rewritten with other samples is an error when the dataset is opened.
"""

from __future__ import annotations

from typing import Any

from zephon_webdataset.reader import WebDatasetReader


def build_index(path: str, *, checksum: bool = False, **options: Any) -> str:
    """Index every tar under ``path`` (a folder, a tar or a brace pattern), write the manifest; a summary.

    ``checksum``: record each tar's SHA-256 too (for the reader option ``verify="checksum"``).
    """
    options.setdefault("rebuild_stale", True)
    reader = WebDatasetReader(path, manifest=False, **options)
    try:
        where = reader.save_manifest(checksum=checksum)
        shards = reader.shards()
    finally:
        reader.close()
    built = reader.built_indexes
    return (
        f"webdataset: {len(shards)} tars, {sum(s.num_samples for s in shards)} samples; "
        f"{built} index(es) built, {len(shards) - built} up to date; {where}"
    )
