"""The multiplexer (``zephon_core.runtime.multiplexer.Multiplexer``): whole rounds, in lane order.

A rank hands the training loop one microbatch per lane per round, in lane order, whatever order the
lanes' microbatches arrive in; it starts a round only when every lane of it has a microbatch, so all
ranks stop at the same global step; and after a resume it continues at the lane with the fewest
delivered microbatches (ties: the lowest lane id), which is where the interrupted round stood. The
tests put real ``SampleBatch`` messages on its inbound queue by hand.
"""

from __future__ import annotations

import queue

import numpy as np
import pytest

from zephon_core.errors import ZephonError
from zephon_core.runtime.context import Context
from zephon_core.runtime.messages import Kind, Message
from zephon_core.runtime.multiplexer import Multiplexer
from zephon_core.runtime.replay import LaneStart, ResumePoint
from zephon_core.runtime.types import SampleBatch


def batch(lane: int, index: int) -> Message:
    """Microbatch ``index`` of ``lane``; it resumes at window ``lane``, skip ``index + 1``."""
    body = SampleBatch(
        lane, index, {"x": np.array([lane, index])}, [(lane,), (index,)], resume=ResumePoint(lane, index + 1)
    )
    return Message(Kind.DATA, lane, 0, body, seq=index)


def lane_end(lane: int, leftover: int = 0) -> Message:
    return Message(Kind.LANE_END, lane, 0, leftover)


def mux(lanes: list[int], *messages: Message, starts: dict[int, LaneStart] | None = None) -> Multiplexer:
    inbound: queue.Queue[Message] = queue.Queue()
    for m in messages:
        inbound.put(m)
    return Multiplexer(lanes, {lane: (starts or {}).get(lane, LaneStart()) for lane in lanes}, Context(), inbound, 2)


def order(m: Multiplexer) -> list[tuple[int, int]]:
    return [(b.lane, b.lane_index) for b in m]


def test_round_robin_in_lane_order_whatever_the_arrival_order() -> None:
    arrivals = [batch(2, 0), batch(2, 1), batch(1, 0), batch(0, 0), batch(1, 1), batch(0, 1)]
    m = mux([0, 1, 2], *arrivals, lane_end(0), lane_end(1), lane_end(2))
    assert order(m) == [(0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (2, 1)]
    assert m.delivered == {0: 2, 1: 2, 2: 2}
    assert m.resume == {0: ResumePoint(0, 2), 1: ResumePoint(1, 2), 2: ResumePoint(2, 2)}
    assert m.finished


def test_only_whole_rounds_are_delivered() -> None:
    """Lane 1 ends after one microbatch: the second round is never started, lanes 0 and 2 keep theirs."""
    m = mux([0, 1, 2], batch(0, 0), batch(0, 1), batch(1, 0), lane_end(1, leftover=3), batch(2, 0), batch(2, 1))
    assert order(m) == [(0, 0), (1, 0), (2, 0)]
    assert m.backlog(0) == 1  # lane 0's second microbatch waits, undelivered
    assert m.delivered == {0: 1, 1: 1, 2: 1}
    assert m.leftover == {1: 3}


@pytest.mark.parametrize(
    ("delivered", "first"),
    [
        ({0: 4, 1: 4, 2: 4}, 0),  # a round boundary: all tied, the lowest lane
        ({0: 5, 1: 4, 2: 4}, 1),  # lane 0 of the round was delivered: lanes 1 and 2 tie, 1 is lower
        ({0: 5, 1: 5, 2: 4}, 2),
    ],
)
def test_a_resume_continues_at_the_lane_with_the_fewest_delivered(delivered: dict[int, int], first: int) -> None:
    starts = {lane: LaneStart(window=1, skip=0, delivered=n) for lane, n in delivered.items()}
    arrivals = [batch(lane, n + j) for j in range(2) for lane, n in delivered.items()]
    m = mux([0, 1, 2], *arrivals, lane_end(0), lane_end(1), lane_end(2), starts=starts)
    assert m.next_lane == first
    got = order(m)
    assert got[0] == (first, delivered[first])
    assert [lane for lane, _ in got] == [*range(first, 3), 0, 1, 2][: len(got)]
    # the interrupted round is completed first; then whole rounds follow
    assert m.delivered[0] == m.delivered[1] == m.delivered[2]


def test_the_resumed_partial_round_needs_only_its_remaining_lanes() -> None:
    """Resuming at lane 1 of 2 lanes: lane 1's microbatch ends the round even though lane 0 has no more."""
    starts = {0: LaneStart(0, 0, 3), 1: LaneStart(0, 0, 2)}
    m = mux([0, 1], batch(1, 2), lane_end(0), lane_end(1), starts=starts)
    assert order(m) == [(1, 2)]
    assert m.delivered == {0: 3, 1: 3}


def test_a_fresh_run_that_cannot_fill_one_round_says_so() -> None:
    m = mux([0, 1], batch(0, 0), lane_end(0), lane_end(1, leftover=1))
    with pytest.raises(ZephonError, match=r"the data ended before one whole round.*lanes \[1\] had none"):
        next(m)


def test_outlook_counts_waiting_and_in_flight_microbatches() -> None:
    """The feeder's pacing signal: waiting ones, plus messages in flight at the lane's rate so far."""
    m = mux([0, 1], batch(0, 0), batch(0, 1), Message(Kind.FLUSH, 0, 0, seq=2), batch(1, 0))
    assert m.outlook(0, in_flight=3, passed=0) == 0.0  # nothing is through: no rate yet
    assert m.last_arrived(0) == -1
    for _ in range(3):
        m._pull()  # what a round's first __next__ does while it waits for lanes
    assert m.backlog(0) == 2
    assert m.last_arrived(0) == 2  # the flush arrived too
    assert m.outlook(0, in_flight=0, passed=3) == 2.0  # nothing in flight: only the waiting ones count
    assert m.outlook(0, in_flight=3, passed=3) == pytest.approx(2 + 3 * 2 / 3)
    assert m.outlook(0, in_flight=0, passed=6) == 2.0  # through without output (held): adds nothing
