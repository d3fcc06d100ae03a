"""The fetch stage hands out a reader's own rows only through the declared ``SharesRows`` capability.

With nothing after fetch that can change a row, copying each record is pure cost, so a reader that
declares :class:`~zephon_core.work.readers.SharesRows` is read through ``read_shared``. The check is the
capability, not the class: a third-party reader that declares it shares, and a ``MemoryReader``
subclass that changes what ``read`` returns is read through its own ``read``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from zephon_core import Dataset, Pipeline, StaticMixtureWorkSource
from zephon_core.runtime.fetch import FetchWorker
from zephon_core.work.readers import MemoryReader, Reader, ShardInfo, SharesRows

ROWS = [{"x": np.int64(i)} for i in range(8)]


def task(*index: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = len(index)
    return np.zeros(n, np.int64), np.zeros(n, np.int64), np.array(index, np.int64)


class Stored(Reader):
    """A third-party reader of rows it keeps, declaring the capability."""

    format = "stored"

    def __init__(self) -> None:
        self.rows = [dict(r) for r in ROWS]
        self.shared_reads = 0

    def shards(self) -> list[ShardInfo]:
        return [ShardInfo("stored-0", len(self.rows))]

    def read(self, shard: int, indices: np.ndarray) -> list[dict[str, Any]]:
        return [dict(self.rows[i]) for i in indices.tolist()]

    def read_shared(self, shard: int, indices: np.ndarray) -> list[dict[str, Any]]:
        self.shared_reads += 1
        return [self.rows[i] for i in indices.tolist()]


class Tagged(MemoryReader):
    """A MemoryReader whose ``read`` adds a field: sharing the stored rows would lose it."""

    def read(self, shard: int, indices: np.ndarray) -> list[dict[str, Any]]:
        return [{**r, "tag": 1} for r in super().read(shard, indices)]


def test_memory_reader_shares_its_rows_only_when_asked() -> None:
    reader = MemoryReader(ROWS, 8)
    assert isinstance(reader, SharesRows)
    shared = FetchWorker(("d",), (reader,), share_rows=True)(task(3, 1))
    copied = FetchWorker(("d",), (reader,), share_rows=False)(task(3, 1))
    assert shared[0] is reader._records[3] and shared[1] is reader._records[1]
    assert copied[0] == shared[0] and copied[0] is not reader._records[3]


def test_a_third_party_reader_that_declares_it_shares() -> None:
    reader = Stored()
    out = FetchWorker(("d",), (reader,), share_rows=True)(task(0, 5))
    assert reader.shared_reads == 1 and out[1] is reader.rows[5]


def test_a_subclass_that_overrides_read_is_read_through_it() -> None:
    out = FetchWorker(("d",), (Tagged(ROWS, 8),), share_rows=True)(task(2, 4))
    assert [r["tag"] for r in out] == [1, 1]


def test_a_pipeline_without_operators_shares_and_batches_the_same() -> None:
    def batches(reader: Reader) -> list[list[int]]:
        source = StaticMixtureWorkSource([Dataset("d", reader)], seed=3, chunk_size=4)
        pipe = Pipeline(source).options(lanes=1).batch(2)
        with pipe as p:
            return [b.data["x"].tolist() for _, b in zip(range(4), p)]

    stored = Stored()
    assert batches(stored) == batches(MemoryReader(ROWS, 8))
    assert stored.shared_reads > 0
