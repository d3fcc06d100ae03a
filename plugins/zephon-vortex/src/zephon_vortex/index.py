"""``zephon index`` for Vortex: validate every footer and write ``_zephon_manifest.json``.

The footer holds the layout and row count, so nothing per file is written. The manifest records
which files belong to the dataset, their sizes and row counts: a file that later goes missing,
appears or changes is then an error instead of a silently different dataset.
"""

from __future__ import annotations

from typing import Any


def build_index(path: str, **options: Any) -> str:
    """Open and check every file's footer, write the manifest; return a one-line summary."""
    from zephon_core.storage import ManifestEntry, write_manifest
    from zephon_vortex.reader import VortexReader

    reader = VortexReader(path, manifest=False, **options)
    shards = reader.shards()
    entries = [ManifestEntry(f.rel, f.size, s.num_samples) for f, s in zip(reader.files(), shards)]
    where = (
        "single file: no manifest"
        if reader.storage.is_single_file
        else write_manifest(reader.storage, "vortex", entries)
    )
    return f"vortex: {len(shards)} files, {sum(s.num_samples for s in shards)} rows; footers valid; {where}"
