"""Which lane the feeder feeds next when an operator holds a lane's records.

``ensure_mixture`` (waiting for the other dataset's tokens) and a packer's open row hold records, and
on real text such holds come in runs: a lane yields nothing for several chunks, then many
microbatches at once. If the lane's chunk in flight counts at the lane's average rate, the lane looks
fed, gets one chunk per trip through the pipeline, and the training loop waits a whole trip for each
chunk of the run. A held lane (its latest message through yielded nothing) must instead get several
chunks in flight at once, and only a bounded number, or it crowds out the other lanes. The tests
drive a real feeder's puts and a real multiplexer's arrivals by hand, in a chosen order.
"""

from __future__ import annotations

import queue

import numpy as np

from zephon_core import Dataset, StaticMixtureWorkSource
from zephon_core.runtime.context import Context
from zephon_core.runtime.feeder import HELD_LOOKAHEAD, Feeder
from zephon_core.runtime.messages import Kind, Message
from zephon_core.runtime.multiplexer import Multiplexer
from zephon_core.runtime.replay import LaneStart
from zephon_core.runtime.types import SampleBatch
from zephon_core.work.lanes import LaneLayout


def pair() -> tuple[Feeder, Multiplexer, queue.Queue[Message]]:
    """A feeder over two lanes and the multiplexer that paces it (and that multiplexer's inbound queue)."""
    layout = LaneLayout(2)
    starts = {lane: LaneStart() for lane in layout.owned}
    src = StaticMixtureWorkSource(
        [Dataset.from_records("d", [{"i": i} for i in range(40)], shard_size=20)], chunk_size=4
    )
    ctx = Context()
    inbound: queue.Queue[Message] = queue.Queue()
    mux = Multiplexer(layout.owned, starts, ctx, inbound)
    return Feeder(src, layout, 0, starts, ctx, queue.Queue(), mux), mux, inbound


def arrive(mux: Multiplexer, inbound: queue.Queue[Message], lane: int, seq: int, microbatches: int) -> None:
    """The microbatches of ``lane`` made from its feeder message ``seq`` reach the multiplexer."""
    for i in range(microbatches):
        body = SampleBatch(lane, seq * 100 + i, {"x": np.array([lane, seq, i])}, [(lane,)])
        inbound.put(Message(Kind.DATA, lane, 0, body, seq))
        mux._pull()


def held_lane_0() -> tuple[Feeder, Multiplexer]:
    """Lane 0's second message passed every stage without output; the training loop took all it had.

    Lane 0 yielded 3 microbatches from 2 messages through (1.5 per message) and has one more in
    flight; lane 1 has one microbatch waiting and nothing in flight.
    """
    feeder, mux, inbound = pair()
    feeder._put(Kind.DATA, 0, 0)  # lane 0, seq 0: three microbatches
    feeder._put(Kind.DATA, 1, 0)  # lane 1, seq 0: one
    feeder._put(Kind.DATA, 0, 0)  # lane 0, seq 1: its records are held (no output)
    feeder._put(Kind.DATA, 1, 0)  # lane 1, seq 1: one, after lane 0's seq 1 passed every stage
    arrive(mux, inbound, 0, 0, 3)
    arrive(mux, inbound, 1, 0, 1)
    arrive(mux, inbound, 1, 1, 1)
    mux.ready[0].clear()  # the training loop took lane 0's three microbatches and one of lane 1's
    mux.ready[1].popleft()
    feeder._put(Kind.DATA, 0, 0)  # lane 0, seq 2: in flight
    feeder.settle()
    return feeder, mux


def test_a_held_lanes_chunk_in_flight_does_not_make_it_look_fed() -> None:
    feeder, _ = held_lane_0()
    assert feeder.in_flight(0) == 1 and feeder.held(0)
    assert feeder.in_flight(1) == 0 and not feeder.held(1)
    # At its average rate the chunk in flight would promise 1.5 microbatches and lane 1 (one waiting)
    # would be fed first; lane 0 is the one that runs dry first.
    assert feeder.outlook(0) == 0.0
    assert feeder.outlook(1) == 1.0
    assert feeder._pick_lane([0, 1], dict(feeder.sent)) == 0


def test_a_held_lane_gets_a_bounded_run_of_chunks_then_the_others_get_theirs() -> None:
    feeder, _ = held_lane_0()
    picks = []
    for _ in range(HELD_LOOKAHEAD + 2):
        lane = feeder._pick_lane([0, 1], dict(feeder.sent))
        picks.append(lane)
        feeder._put(Kind.DATA, lane, 0)
    # With one chunk already in flight, lane 0 keeps being fed until more than HELD_LOOKAHEAD are in
    # flight; the next one counts at its rate (1.5 microbatches: more than lane 1's one waiting), so
    # lane 1 gets its chunk, and then lane 0 again (1.5 against lane 1's 1 + 1).
    assert picks == [0] * HELD_LOOKAHEAD + [1, 0]
    assert feeder.in_flight(0) == HELD_LOOKAHEAD + 2


def test_a_lane_is_no_longer_held_once_a_later_message_of_it_yields() -> None:
    feeder, mux, inbound = pair()
    feeder._put(Kind.DATA, 0, 0)  # seq 0: held
    feeder._put(Kind.DATA, 1, 0)
    arrive(mux, inbound, 1, 0, 1)  # lane 1's arrival shows lane 0's seq 0 passed without output
    feeder.settle()
    feeder.in_flight(0)
    assert feeder.held(0)
    feeder._put(Kind.DATA, 0, 0)  # seq 1: releases the held records and more
    arrive(mux, inbound, 0, 1, 4)
    feeder.settle()
    assert feeder.in_flight(0) == 0
    assert not feeder.held(0)
    assert feeder.outlook(0) == 4.0
