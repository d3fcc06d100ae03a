"""``zephon index`` for Parquet: validate every footer and write ``_zephon_manifest.json``.

The footers already are the row index, so nothing per file is written. The manifest records which
files belong to the dataset, their sizes and row-group sizes: a file that later goes missing, appears
or changes is then an error instead of a silently different dataset, and listing a remote dataset
needs no footer reads.
"""

from __future__ import annotations

from typing import Any


def build_index(path: str, *, checksum: bool = False, jobs: int = 8, **options: Any) -> str:
    """Read and check every file's footer, write the manifest; return a one-line summary.

    ``checksum``: record each file's SHA-256 too (for the reader option ``verify="checksum"``).
    ``jobs``: files checksummed at once (threads).
    """
    from zephon_parquet.reader import ParquetReader

    reader = ParquetReader(path, manifest=False, **options)
    where = reader.save_manifest(checksum=checksum, jobs=jobs)
    shards = reader.shards()
    groups = sum(len(reader.row_group_offsets(i)) - 1 for i in range(len(shards)))
    return (
        f"parquet: {len(shards)} files, {sum(s.num_samples for s in shards)} rows, {groups} row groups; "
        f"footers valid; {where}"
    )
