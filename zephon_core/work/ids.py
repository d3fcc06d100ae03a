"""Sample ids: the identity of a source sample inside a run, as one integer.

``dataset << 48 | chunk << 16 | offset``, so every record's lineage says which dataset it came from.
Record *keys* (for hash-derived draws) are the same number without the dataset bits; dataset numbers
stay below ``2**15``, so ids fit a signed 64-bit array."""

from __future__ import annotations

from collections.abc import Iterable

OFFSET_BITS = 16
CHUNK_BITS = 32
DATASET_SHIFT = OFFSET_BITS + CHUNK_BITS
MAX_DATASETS = 1 << 15


def record_key(chunk: int, offset: int) -> int:
    """The lane-unique key fetch gives the ``offset``-th sample of chunk ``chunk``."""
    return (chunk << OFFSET_BITS) | offset


def sample_id(chunk: int, offset: int, dataset: int = 0) -> int:
    """The id of the ``offset``-th pointer of chunk ``chunk``, drawn from dataset number ``dataset``."""
    return (dataset << DATASET_SHIFT) | (chunk << OFFSET_BITS) | offset


def split_sample_id(sid: int) -> tuple[int, int]:
    """``(chunk, offset)`` of a sample id (or of a record key)."""
    return (sid >> OFFSET_BITS) & ((1 << CHUNK_BITS) - 1), sid & ((1 << OFFSET_BITS) - 1)


def dataset_of(sid: int) -> int:
    """The dataset number (index into the work source's datasets) a sample id was drawn from."""
    return sid >> DATASET_SHIFT


def datasets_of(lineage: Iterable[int]) -> list[int]:
    """The dataset number of each sample id of a lineage."""
    return [sid >> DATASET_SHIFT for sid in lineage]
