"""``zephon index PATH`` for LitData: check every chunk against ``index.json``, write the manifest.

LitData's ``index.json`` already is the index (sample counts per chunk; offsets live in chunk
headers). What is worth doing ahead of time is checking: every chunk exists, its header agrees with
the index, its offsets fit the file, and compressed chunks decompress (which also warms the node
cache for remote or ``.zstd.bin`` chunks). Then ``_zephon_manifest.json`` records ``index.json``'s
SHA-256 and every chunk's size and item count (and with ``checksum`` its SHA-256), so a chunk
deleted later, even together with its entry in ``index.json``, is an error when the dataset is opened.
"""

from __future__ import annotations

from typing import Any

from zephon_core import ConfigError
from zephon_litdata.reader import LitDataReader


def build_index(path: str, *, checksum: bool = False, jobs: int = 8, **options: Any) -> str:
    """Validate the dataset at ``path``, write its manifest and return a one-line summary of it.

    ``checksum``: record each chunk's SHA-256 too (for the reader option ``verify="checksum"``).
    ``jobs``: files checksummed at once (threads).
    """
    try:
        reader = LitDataReader(path, manifest=False, **options)
    except ConfigError:
        if "block_size" in options:
            raise
        # A TokensLoader dataset needs block_size only to cut samples; what is checked and recorded
        # (chunks, their items and sizes) does not depend on it, so count single tokens.
        reader = LitDataReader(path, manifest=False, block_size=1, **options)
    try:
        kinds = reader.check()
        where = reader.save_manifest(checksum=checksum, jobs=jobs)
    finally:
        reader.close()
    lay = reader.layout
    samples = sum(s.num_samples for s in reader.shards())
    compression = "none" if lay.compression is None else f"{lay.compression} ({lay.level})"
    layouts = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
    return (
        f"litdata: {len(lay.chunks)} chunks ({layouts}), {samples} samples, {lay.loader} "
        f"[{', '.join(lay.data_format)}], compression {compression}; all chunks agree with index.json; {where}"
    )
