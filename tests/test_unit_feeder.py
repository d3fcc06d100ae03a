"""The feeder (``zephon_core.runtime.feeder.Feeder``): each lane's chunks, in order, and its sentinels.

Operators restart at every window, and a checkpoint counts in windows, so where the feeder puts
``FLUSH`` is part of the data: one after every ``K`` chunks of a lane, one closing the last, partial
window at the lane's end (never a second one when the lane ends exactly on a boundary), then
``LANE_END``, and ``STOP`` after every lane ended. The tests run a real feeder over a real work
source on the test's thread (the output queue is unbounded, so it never blocks) and read what it
put, lane by lane.
"""

from __future__ import annotations

import queue

from zephon_core import Dataset, StaticMixtureWorkSource
from zephon_core.runtime.context import Context
from zephon_core.runtime.feeder import Feeder
from zephon_core.runtime.messages import Kind, Message
from zephon_core.runtime.multiplexer import Multiplexer
from zephon_core.runtime.replay import LaneStart
from zephon_core.work.contract import Chunk
from zephon_core.work.lanes import LaneLayout

Event = tuple[str, int, int]
"""``("data", window, chunk number)`` or ``(sentinel kind, window, -1)``."""


def source(records: int, chunk_size: int) -> StaticMixtureWorkSource:
    """One dataset of ``records`` records in chunks of ``chunk_size`` (the last one may be short)."""
    return StaticMixtureWorkSource(
        [Dataset.from_records("d", [{"i": i} for i in range(records)], shard_size=50)], chunk_size=chunk_size
    )


def feed(
    src: StaticMixtureWorkSource,
    lanes: int,
    k: int,
    starts: dict[int, LaneStart] | None = None,
    group: int | None = None,
    world: tuple[int, int] = (0, 1),
) -> tuple[dict[int, list[Event]], list[Message], Feeder]:
    """Run a feeder to its end; per lane its events, and every message in the order put."""
    layout = LaneLayout(lanes, world_size=world[1], rank=world[0])
    starts = {lane: (starts or {}).get(lane, LaneStart()) for lane in layout.owned}
    ctx = Context()
    out: queue.Queue[Message] = queue.Queue()
    mux = Multiplexer(layout.owned, starts, ctx, queue.Queue())  # it paces the feeder, as in a pipeline
    feeder = Feeder(src, layout, k, starts, ctx, out, mux, (lambda n: group) if group else (lambda n: n))
    feeder.run()
    assert ctx.error is None, ctx.error
    messages = []
    while not out.empty():
        messages.append(out.get_nowait())
    events: dict[int, list[Event]] = {lane: [] for lane in layout.owned}
    for m in messages[:-1]:
        number = m.body.number if isinstance(m.body, Chunk) else -1
        events[m.lane].append((m.kind.value, m.window, number))
    return events, messages, feeder


def test_a_flush_after_every_k_chunks_and_one_closing_the_partial_last_window() -> None:
    """10 chunks over 2 lanes, K=2: lane 0 has chunks 0,2,4,6,8 (windows of 2, then 1 left over);
    lane 1 has 1,3,5,7,9 as well."""
    events, messages, feeder = feed(source(100, 10), lanes=2, k=2)
    assert events[0] == [
        ("data", 0, 0),
        ("data", 0, 2),
        ("flush", 0, -1),
        ("data", 1, 4),
        ("data", 1, 6),
        ("flush", 1, -1),
        ("data", 2, 8),
        ("flush", 2, -1),  # the partial last window is closed too
        ("lane_end", 2, -1),
    ]
    assert [e for e in events[1] if e[0] == "data"] == [
        ("data", w, c) for w, c in ((0, 1), (0, 3), (1, 5), (1, 7), (2, 9))
    ]
    assert messages[-1].kind is Kind.STOP
    assert feeder.chunks == {0: 5, 1: 5}


def test_a_lane_ending_on_a_window_boundary_gets_no_second_flush() -> None:
    """8 chunks, 2 lanes, K=2: each lane's 4 chunks fill two windows exactly."""
    events, _, _ = feed(source(80, 10), lanes=2, k=2)
    for lane in (0, 1):
        kinds = [(kind, window) for kind, window, _ in events[lane] if kind != "data"]
        assert kinds == [("flush", 0), ("flush", 1), ("lane_end", 2)], lane


def test_without_flushes_the_lane_end_closes_the_only_window() -> None:
    """``flush_every=0``: one window for the whole run, closed once at the lane's end."""
    events, _, _ = feed(source(50, 10), lanes=2, k=0)
    assert events[0] == [("data", 0, 0), ("data", 0, 2), ("data", 0, 4), ("flush", 0, -1), ("lane_end", 0, -1)]
    assert events[1] == [("data", 0, 1), ("data", 0, 3), ("flush", 0, -1), ("lane_end", 0, -1)]


def test_a_resumed_lane_starts_at_its_window_and_keeps_the_same_sentinels() -> None:
    events, _, _ = feed(source(100, 10), lanes=2, k=2, starts={0: LaneStart(window=1, skip=3, delivered=2)})
    assert events[0] == [
        ("data", 1, 4),
        ("data", 1, 6),
        ("flush", 1, -1),
        ("data", 2, 8),
        ("flush", 2, -1),
        ("lane_end", 2, -1),
    ]
    assert events[1][0] == ("data", 0, 1)  # lanes without a start begin at the beginning


def test_a_chunk_sent_in_parts_is_flushed_after_its_last_part() -> None:
    """Read groups of 4 records: a chunk of 10 goes as parts of 4, 4 and 2 with the same window."""
    _, messages, _ = feed(source(40, 10), lanes=2, k=2, group=4)
    lane0 = [m for m in messages if m.lane == 0]
    parts = [(m.body.number, m.body.offset, len(m.body)) for m in lane0 if m.kind is Kind.DATA]
    assert parts == [(0, 0, 4), (0, 4, 4), (0, 8, 2), (2, 0, 4), (2, 4, 4), (2, 8, 2)]
    assert [m.kind for m in lane0[-2:]] == [Kind.FLUSH, Kind.LANE_END]
    assert [m.seq for m in lane0] == list(range(len(lane0)))  # seq numbers the lane's messages


def test_a_rank_feeds_only_its_own_lanes() -> None:
    events, messages, _ = feed(source(120, 10), lanes=4, k=1, world=(1, 2))
    assert set(events) == {2, 3}
    assert {m.lane for m in messages[:-1]} == {2, 3}
    assert [c for kind, _, c in events[3] if kind == "data"] == [3, 7, 11]
