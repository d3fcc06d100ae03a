"""The batch stage's accumulator and the fetch worker give the same records however a message is cut.

The batch accumulator cuts a large message into microbatches by offset; the fetch worker hands a
single (dataset, shard) group's rows on without re-placing them. Both are short cuts of the general
path, so these tests compare them with it: one big message against the same records one at a time,
a one-group read against the same pointers read as several groups.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from zephon_core.errors import ReaderError
from zephon_core.ops.contract import Records
from zephon_core.runtime.batch import BatchAccumulator
from zephon_core.runtime.fetch import FetchWorker
from zephon_core.runtime.replay import LaneStart, ResumePoint
from zephon_core.work.readers import MemoryReader


def _records(lo: int, hi: int, dropped: list[tuple[int, ...]] | None = None) -> Records:
    return Records([{"x": i} for i in range(lo, hi)], list(range(lo, hi)), [(i,) for i in range(lo, hi)], dropped or [])


def _cut(acc: BatchAccumulator, messages: list[tuple[Records, int]]) -> list[tuple[Any, ...]]:
    out = []
    for records, window in messages:
        for w in acc.push(records, window):
            out.append((w.task, w.keys, w.lineage, w.dropped, w.meta.index, w.meta.resume))
    return out


@pytest.mark.parametrize("start", [LaneStart(), LaneStart(window=0, skip=5, delivered=3)])
def test_one_large_message_cuts_like_records_one_at_a_time(start: LaneStart) -> None:
    size = 8
    whole = _records(0, 70, dropped=[(999,)])
    big = BatchAccumulator(size, start)
    got = _cut(big, [(whole, 0), (_records(70, 75), 1)])
    one = BatchAccumulator(size, start)
    parts = [
        (Records([whole.payloads[i]], [whole.keys[i]], [whole.lineage[i]], whole.dropped if i == 0 else []), 0)
        for i in range(70)
    ]
    want = _cut(one, [*parts, (_records(70, 75), 1)])
    assert got == want
    assert [g[4] for g in got] == list(range(start.delivered, start.delivered + len(got)))
    assert big.held == one.held and big.rows == one.rows
    # each microbatch resumes right after its last record (the replayed ones count in the window)
    in_window_0 = [g[5] for g in got if g[5].window == 0]
    assert in_window_0 and in_window_0 == [ResumePoint(0, start.skip + (k + 1) * size) for k in range(len(in_window_0))]
    # the tombstones go with the first microbatch only, never twice (a replayed message brings none)
    assert sum(len(g[3]) for g in got) == (1 if start.skip == 0 else 0)


def test_keyed_microbatches_carry_their_first_key() -> None:
    acc = BatchAccumulator(4, LaneStart(), keyed=True)
    works = acc.push(_records(10, 22), 0)
    assert [w.task[1] for w in works] == [10, 14, 18]
    assert [w.task[0] for w in works] == [[{"x": i} for i in range(k, k + 4)] for k in (10, 14, 18)]


class _KeepsItsList(MemoryReader):
    """A reader that hands out one list it keeps (allowed): the worker's output must not be that list."""

    def __init__(self, records: list[dict[str, Any]]) -> None:
        super().__init__(records, 10)
        self.last: list[dict[str, Any]] = []

    def read(self, shard: int, indices: np.ndarray) -> list[dict[str, Any]]:
        self.last = super().read(shard, indices)
        return self.last


def test_fetch_one_group_reads_like_several() -> None:
    recs = [{"i": i} for i in range(40)]
    a, b = _KeepsItsList(recs), MemoryReader(recs, 10)
    worker = FetchWorker(("a", "b"), (a, b))
    index = np.array([3, 1, 4, 1, 5, 9, 2, 6], dtype=np.int64)
    one = worker((np.zeros(8, np.int32), np.full(8, 2, np.int64), index))
    assert one == [recs[20 + i] for i in index]
    assert one is not a.last
    mixed_ds = np.array([0, 1, 0, 1, 0, 1, 0, 1], np.int32)
    mixed_shard = np.array([2, 2, 3, 2, 2, 0, 2, 2], np.int64)
    several = worker((mixed_ds, mixed_shard, index))
    assert several == [recs[10 * s + i] for s, i in zip(mixed_shard.tolist(), index.tolist())]


def test_fetch_one_group_failure_names_its_first_pointer() -> None:
    worker = FetchWorker(("a",), (MemoryReader([{"i": 0}] * 5, 5),))
    with pytest.raises(ReaderError, match="index out of range") as info:
        worker((np.zeros(3, np.int32), np.zeros(3, np.int64), np.array([0, 1, 7])))
    assert getattr(info.value, "index", None) == 0
