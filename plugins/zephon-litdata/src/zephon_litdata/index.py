"""``zephon index PATH`` for LitData: check every chunk against ``index.json`` and summarise.

LitData's ``index.json`` already is the index (sample counts per chunk; offsets live in chunk
headers), so nothing is written. What is worth doing ahead of time is checking: every chunk exists,
its header agrees with the index, its offsets fit the file, and compressed chunks decompress (which
also warms the node cache for remote or ``.zstd.bin`` chunks).
"""

from __future__ import annotations

from typing import Any

from zephon_litdata.reader import LitDataReader


def build_index(path: str, **options: Any) -> str:
    """Validate the dataset at ``path`` and return a one-line summary of it."""
    reader = LitDataReader(path, **options)
    try:
        kinds = reader.check()
    finally:
        reader.close()
    lay = reader.layout
    samples = sum(s.num_samples for s in reader.shards())
    compression = "none" if lay.compression is None else f"{lay.compression} ({lay.level})"
    layouts = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
    return (
        f"litdata: {len(lay.chunks)} chunks ({layouts}), {samples} samples, {lay.loader} "
        f"[{', '.join(lay.data_format)}], compression {compression}; all chunks agree with index.json"
    )
