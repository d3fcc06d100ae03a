"""The replay cursor (``zephon_core.runtime.replay``) and the batch accumulator that stamps resume points.

A checkpoint stores, per lane, the window to replay and how many of its records the training loop
already consumed. Resuming must drop exactly those records, no more and no fewer, however the
replayed records arrive in groups, including when the last consumed microbatch was cut in the
middle of a group or spans two windows. These tests feed one lane's records by hand to the real
:class:`~zephon_core.runtime.batch.BatchAccumulator` (which owns a
:class:`~zephon_core.runtime.replay.ReplayCursor`) and compare the resumed microbatches with the
uninterrupted ones.
"""

from __future__ import annotations

import pytest

from zephon_core.errors import CheckpointError
from zephon_core.ops.contract import Records, Work
from zephon_core.runtime.batch import BatchAccumulator, MicrobatchMeta
from zephon_core.runtime.replay import LaneStart, ReplayCursor, ResumePoint, lane_state
from zephon_core.work.lanes import LaneLayout


def records(ids: range) -> Records:
    """Records ``{"i": i}`` keyed and traced by ``i``."""
    return Records([{"i": i} for i in ids], list(ids), [(i,) for i in ids])


def run(acc: BatchAccumulator, windows: list[tuple[int, range]], group: int) -> list[Work]:
    """Push each window's records in groups of ``group`` (the grouping a resumed run need not share)."""
    out: list[Work] = []
    for window, ids in windows:
        for start in range(ids.start, ids.stop, group):
            out.extend(acc.push(records(range(start, min(start + group, ids.stop))), window))
        acc.cursor.close_window(window)
    return out


def rows(work: Work) -> list[int]:
    return [p["i"] for p in work.task]


def meta(work: Work) -> MicrobatchMeta:
    m = work.meta
    assert isinstance(m, MicrobatchMeta)
    return m


def test_a_fresh_cursor_drops_nothing_and_counts_each_window_from_zero() -> None:
    c = ReplayCursor(LaneStart())
    assert c.admit(5, 0) == 0
    assert c.position(held=2) == ResumePoint(0, 3)
    assert c.admit(4, 1) == 0  # a new window restarts the count
    assert c.position(held=0) == ResumePoint(1, 4)


def test_the_cursor_drops_exactly_skip_records_of_the_start_window_across_groups() -> None:
    c = ReplayCursor(LaneStart(window=2, skip=5, delivered=3))
    assert [c.admit(3, 2), c.admit(4, 2), c.admit(4, 2)] == [3, 2, 0]
    assert c.position(held=1) == ResumePoint(2, 10)  # positions count every record of the window, dropped or not
    c.close_window(2)
    assert c.admit(2, 3) == 0


def test_skipping_more_than_the_window_holds_is_an_error_naming_the_checkpoint() -> None:
    c = ReplayCursor(LaneStart(window=1, skip=6))
    c.admit(4, 1)
    with pytest.raises(CheckpointError, match="skip 6 records of window 1, but that window holds only 4"):
        c.close_window(1)
    c = ReplayCursor(LaneStart(window=1, skip=6))
    c.admit(4, 1)
    with pytest.raises(CheckpointError, match="holds only 4"):  # the next window arrives instead of a flush
        c.admit(1, 2)


def test_data_of_an_earlier_window_is_an_error() -> None:
    c = ReplayCursor(LaneStart(window=3, skip=0))
    with pytest.raises(CheckpointError, match="replay reached window 2 after window 3"):
        c.admit(1, 2)


def test_a_resume_cut_inside_a_group_delivers_the_uninterrupted_microbatches() -> None:
    """Microbatches of 4 from groups of 3: the cut after microbatch 1 (record 8) falls inside the
    group 6..8, and microbatch 1 itself started inside the group 3..5."""
    data = [(0, range(0, 20))]
    full = run(BatchAccumulator(4, LaneStart()), data, group=3)
    assert [rows(w) for w in full] == [list(range(i, i + 4)) for i in range(0, 20, 4)]
    assert [meta(w).resume for w in full] == [ResumePoint(0, n) for n in (4, 8, 12, 16, 20)]
    for cut in range(1, len(full)):
        point = meta(full[cut - 1]).resume
        start = LaneStart(point.window, point.skip, delivered=cut)
        for group in (3, 5, 7):  # a resumed run may group the replayed records differently
            resumed = run(BatchAccumulator(4, start), data, group=group)
            assert [rows(w) for w in resumed] == [rows(w) for w in full[cut:]], (cut, group)
            assert [meta(w).index for w in resumed] == list(range(cut, len(full)))


def test_a_microbatch_spanning_two_windows_resumes_inside_the_second() -> None:
    """Window 0 holds 6 records: microbatch 1 is records 4, 5 of window 0 and 100, 101 of window 1,
    so after it the lane replays window 1 and skips 2; window 0 is never replayed."""
    data = [(0, range(0, 6)), (1, range(100, 110))]
    full = run(BatchAccumulator(4, LaneStart()), data, group=4)
    assert [rows(w) for w in full] == [[0, 1, 2, 3], [4, 5, 100, 101], [102, 103, 104, 105], [106, 107, 108, 109]]
    assert meta(full[1]).resume == ResumePoint(1, 2)
    resumed = run(BatchAccumulator(4, LaneStart(1, 2, delivered=2)), data[1:], group=3)
    assert [rows(w) for w in resumed] == [rows(w) for w in full[2:]]
    assert [meta(w).index for w in resumed] == [2, 3]


def test_held_rows_are_not_counted_as_consumed() -> None:
    """Records waiting for a full microbatch are not delivered: the resume point is before them."""
    acc = BatchAccumulator(4, LaneStart())
    (work,) = acc.push(records(range(0, 6)), 0)
    assert acc.held == 2
    assert meta(work).resume == ResumePoint(0, 4)
    (last,) = acc.finish()  # batch(drop_last=False): the held rows as a last, short microbatch
    assert rows(last) == [4, 5] and meta(last).resume == ResumePoint(0, 6)


def test_lane_start_reads_checkpoint_entries_strictly() -> None:
    assert LaneStart.from_state("3", {"window": 2, "skip": 7, "delivered": 9}) == LaneStart(2, 7, 9)
    assert LaneStart(2, 7, 9).first_chunk(flush_every=4) == 8
    for bad in ({"window": 1, "skip": -1, "delivered": 0}, {"window": True, "skip": 0, "delivered": 0}, {"window": 1}):
        with pytest.raises(CheckpointError, match="checkpoint lane 3: field"):
            LaneStart.from_state("3", bad)
    with pytest.raises(CheckpointError, match="checkpoint lane 3: expected a dict"):
        LaneStart.from_state("3", [1, 2, 3])


def test_lane_state_names_the_global_chunk_to_replay_from() -> None:
    layout = LaneLayout(4, world_size=2, rank=1)
    assert lane_state(3, ResumePoint(2, 5), 11, layout, flush_every=8) == {
        "window": 2,
        "skip": 5,
        "delivered": 11,
        "replay_from_chunk": 2 * 8 * 4 + 3,
    }
    assert lane_state(3, ResumePoint(0, 5), 1, layout, flush_every=0)["replay_from_chunk"] == 3
