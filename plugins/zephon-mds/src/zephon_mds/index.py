"""``zephon index PATH`` for MDS: check every shard against ``index.json`` and summarise.

Streaming's ``index.json`` already is the index (sample counts per shard; offsets live in shard
headers), so nothing is written. What is worth doing ahead of time is checking: every shard exists,
has the size and sample count the index gives, and compressed shards decompress (which also warms
the node cache, so training starts on decompressed shards).
"""

from __future__ import annotations

from typing import Any

from zephon_mds.reader import MDSReader


def build_index(path: str, **options: Any) -> str:
    """Validate the dataset at ``path`` and return a one-line summary of it."""
    reader = MDSReader(path, **options)
    try:
        reader.check()
    finally:
        reader.close()
    shards = reader.layout.shards
    codecs = sorted({s.codec or "none" for s in shards})
    columns = sorted({f"{n}:{e}" for s in shards for n, e in zip(s.columns, s.encodings)})
    return (
        f"mds: {len(shards)} shards, {sum(s.samples for s in shards)} samples, compression {'/'.join(codecs)}, "
        f"columns [{', '.join(columns)}]; all shards agree with index.json"
    )
