"""``zephon index`` for Parquet: validate every footer and write ``_zephon_manifest.json``.

The footers already are the row index, so nothing per file is written. The manifest records which
files belong to the dataset, their sizes and row-group sizes: a file that later goes missing, appears
or changes is then an error instead of a silently different dataset, and listing a remote dataset
needs no footer reads.
"""

from __future__ import annotations

from typing import Any


def build_index(path: str, **options: Any) -> str:
    """Read and check every file's footer, write the manifest; return a one-line summary."""
    from zephon_core.storage import ManifestEntry, write_manifest
    from zephon_parquet.reader import ParquetReader

    reader = ParquetReader(path, manifest=False, **options)
    shards = reader.shards()
    entries = []
    for i, (info, shard) in enumerate(zip(reader.files(), shards)):
        rows = [int(n) for n in reader.row_group_offsets(i)[1:] - reader.row_group_offsets(i)[:-1]]
        entries.append(ManifestEntry(info.rel, info.size, shard.num_samples, {"row_groups": rows}))
    groups = sum(len(e.extra["row_groups"]) for e in entries)
    where = (
        "single file: no manifest"
        if reader.storage.is_single_file
        else write_manifest(reader.storage, "parquet", entries)
    )
    return (
        f"parquet: {len(shards)} files, {sum(s.num_samples for s in shards)} rows, {groups} row groups; "
        f"footers valid; {where}"
    )
