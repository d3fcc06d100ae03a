"""``zephon index`` for Vortex: validate every footer and write ``_zephon_manifest.json``.

The footer holds the layout and row count, so nothing per file is written. The manifest records
which files belong to the dataset, their sizes and row counts: a file that later goes missing,
appears or changes is then an error instead of a silently different dataset.
"""

from __future__ import annotations

from typing import Any


def build_index(path: str, *, checksum: bool = False, jobs: int = 8, **options: Any) -> str:
    """Open and check every file's footer, write the manifest; return a one-line summary.

    ``checksum``: record each file's SHA-256 too (for the reader option ``verify="checksum"``).
    ``jobs``: files checksummed at once (threads).
    """
    from zephon_vortex.reader import VortexReader

    reader = VortexReader(path, manifest=False, **options)
    where = reader.save_manifest(checksum=checksum, jobs=jobs)
    shards = reader.shards()
    return f"vortex: {len(shards)} files, {sum(s.num_samples for s in shards)} rows; footers valid; {where}"
