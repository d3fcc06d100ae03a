"""``zephon index PATH`` for MDS: check every shard against ``index.json``, write the manifest.

Streaming's ``index.json`` already is the index (sample counts per shard; offsets live in shard
headers). What is worth doing ahead of time is checking: every shard exists, has the size and sample
count the index gives, and compressed shards decompress (which also warms the node cache, so
training starts on decompressed shards). Then ``_zephon_manifest.json`` records ``index.json``'s
SHA-256 and every shard file's size and sample count (and with ``checksum`` its SHA-256), so a shard
deleted later, even together with its entry in ``index.json``, is an error when the dataset is opened.
"""

from __future__ import annotations

from typing import Any

from zephon_mds.reader import MDSReader


def build_index(path: str, *, checksum: bool = False, jobs: int = 8, **options: Any) -> str:
    """Validate the dataset at ``path``, write its manifest and return a one-line summary of it.

    ``checksum``: record each shard file's SHA-256 too (for the reader option ``verify="checksum"``).
    ``jobs``: files checksummed at once (threads).
    """
    reader = MDSReader(path, manifest=False, **options)
    try:
        reader.check()
        where = reader.save_manifest(checksum=checksum, jobs=jobs)
    finally:
        reader.close()
    shards = reader.layout.shards
    codecs = sorted({s.codec or "none" for s in shards})
    columns = sorted({f"{n}:{e}" for s in shards for n, e in zip(s.columns, s.encodings)})
    return (
        f"mds: {len(shards)} shards, {sum(s.samples for s in shards)} samples, compression {'/'.join(codecs)}, "
        f"columns [{', '.join(columns)}]; all shards agree with index.json; {where}"
    )
