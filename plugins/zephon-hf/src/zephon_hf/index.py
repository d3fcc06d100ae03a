"""``zephon index`` for Hugging Face folders: every config and split, one manifest.

A reader lists one (config, split), but the manifest lives at the folder's root and is shared by
readers of every split, so ``zephon index`` walks all of them and records every data file once:
its size, rows and record-batch (Arrow) or row-group (Parquet) sizes, so that later listings,
remote ones included, read no data file.
"""

from __future__ import annotations

from typing import Any

from zephon_storage import ManifestEntry, Storage, split_storage_options, write_manifest

from zephon_hf.base import FORMAT, folder_catalog


def build_index(path: str, *, checksum: bool = False, jobs: int = 8, **options: Any) -> str:
    """Read every config and split of the folder, write ``_zephon_manifest.json``; a one-line summary.

    Args:
        path: the dataset folder (local path or fsspec URL).
        checksum: also record each file's SHA-256 (for the reader option ``verify="checksum"``).
        jobs: files checksummed at once (threads).
        options: reader options; ``config``, ``split`` and ``columns`` are ignored (all are indexed).
    """
    from zephon_storage import file_checksums

    from zephon_hf.reader import HFReader

    options = {k: v for k, v in options.items() if k not in ("config", "split", "columns", "manifest")}
    storage = Storage(path, **split_storage_options(options)[0])
    if storage.is_single_file:
        reader = HFReader(path, manifest=False, **options)
        rows = sum(s.num_samples for s in reader.shards())
        reader.close()
        return f"hf: one file, {rows} rows; single file: no manifest"
    entries: dict[str, ManifestEntry] = {}
    per_split: list[str] = []
    for config, split in folder_catalog(storage).choices():
        reader = HFReader(path, manifest=False, config=config, split=split, **options)
        try:
            selected = reader._manifest_entries()
        finally:
            reader.close()
        for e in selected:
            entries.setdefault(e.rel, e)
        label = "/".join(x for x in (config, split) if x) or "rows"
        per_split.append(f"{label} {sum(e.samples for e in selected)}")
    listed = sorted(entries.values(), key=lambda e: e.rel)
    if checksum:
        sums = file_checksums(storage, [storage.info(e.rel) for e in listed], workers=max(1, jobs))
        listed = [ManifestEntry(e.rel, e.size, e.samples, e.extra, c) for e, c in zip(listed, sums)]
    where = write_manifest(storage, FORMAT, listed)
    storage.close()
    return f"hf: {len(listed)} files, rows per split: {', '.join(per_split)}; {where}"
