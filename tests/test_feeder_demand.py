"""What paces the feeder: a lane's messages count as in flight only until they are through the pipeline.

Stages forward in the order they received, so once a message (of any lane) reaches the multiplexer,
every message put before it is through, whether it yielded microbatches or its records are held by an
operator (a packer's open row, ``ensure_mixture``). A lane whose records are held and which has
nothing waiting must look empty, or the feeder starves the lane the training loop waits for. The
tests drive a real feeder's puts and a real multiplexer's arrivals by hand, in a chosen order.
"""

from __future__ import annotations

import queue

import numpy as np

from zephon_core import Dataset, StaticMixtureWorkSource
from zephon_core.runtime.context import Context
from zephon_core.runtime.feeder import Feeder
from zephon_core.runtime.messages import Kind, Message
from zephon_core.runtime.multiplexer import Multiplexer
from zephon_core.runtime.replay import LaneStart
from zephon_core.runtime.types import SampleBatch
from zephon_core.work.lanes import LaneLayout


def pair(lanes: int = 2) -> tuple[Feeder, Multiplexer, queue.Queue[Message]]:
    """A feeder and the multiplexer that paces it; the returned queue is the multiplexer's inbound."""
    layout = LaneLayout(lanes)
    starts = {lane: LaneStart() for lane in layout.owned}
    src = StaticMixtureWorkSource([Dataset.from_records("d", [{"i": i} for i in range(40)], shard_size=20)], chunk_size=4)
    ctx = Context()
    inbound: queue.Queue[Message] = queue.Queue()
    mux = Multiplexer(layout.owned, starts, ctx, inbound)
    return Feeder(src, layout, 0, starts, ctx, queue.Queue(), mux), mux, inbound


def arrive(mux: Multiplexer, inbound: queue.Queue[Message], lane: int, seq: int) -> None:
    """One microbatch of ``lane`` descending from its feeder message ``seq`` reaches the multiplexer."""
    body = SampleBatch(lane, seq, {"x": np.array([lane, seq])}, [(lane,)])
    inbound.put(Message(Kind.DATA, lane, 0, body, seq))
    mux._pull()


def test_a_message_held_by_an_operator_is_through_once_a_later_message_arrives() -> None:
    feeder, mux, inbound = pair()
    feeder._put(Kind.DATA, 0, 0)  # lane 0, seq 0: yields a microbatch
    feeder._put(Kind.DATA, 1, 0)  # lane 1, seq 0: yields a microbatch
    feeder._put(Kind.DATA, 0, 0)  # lane 0, seq 1: its records stay in an open row (no output)
    feeder._put(Kind.DATA, 1, 0)  # lane 1, seq 1: yields, after lane 0's seq 1 passed every stage
    arrive(mux, inbound, 0, 0)
    arrive(mux, inbound, 1, 0)
    feeder.settle()
    assert (feeder.in_flight(0), feeder.in_flight(1)) == (1, 1)  # nothing of either lane is known through yet
    arrive(mux, inbound, 1, 1)
    mux.ready[0].popleft()  # the training loop took lane 0's microbatch
    feeder.settle()
    assert feeder.in_flight(0) == 0  # put before lane 1's seq 1, which arrived: through, though it yielded nothing
    assert feeder.in_flight(1) == 0
    assert feeder.outlook(0) == 0.0  # nothing waiting, nothing coming: lane 0 is the one to feed
    assert feeder.outlook(1) == 2.0
    assert feeder._pick_lane([0, 1], {0: 2, 1: 2}) == 0


def test_messages_put_after_the_latest_arrival_stay_in_flight() -> None:
    feeder, mux, inbound = pair()
    feeder._put(Kind.DATA, 0, 0)
    feeder._put(Kind.DATA, 1, 0)
    feeder._put(Kind.DATA, 0, 0)
    arrive(mux, inbound, 0, 0)  # only lane 0's first message is through
    feeder.settle()
    assert (feeder.in_flight(0), feeder.in_flight(1)) == (1, 1)
    assert feeder.outlook(0) == 1.0 + 1 * 1.0  # one waiting, one in flight at one microbatch per message
    assert feeder.outlook(1) == 0.0  # no rate yet: nothing of lane 1 is through
