"""The multiplexer: hands the training loop one microbatch at a time, round-robin over the rank's lanes.

It starts a round only when every lane of it has a microbatch, so every rank of a world stops at the
same global step; per lane, it keeps the count delivered and the last one's resume point (checkpoints)."""

from __future__ import annotations

import collections
import queue
import time
from collections.abc import Iterator, Mapping

from zephon_core.errors import ZephonError
from zephon_core.runtime.context import Context, Stopped
from zephon_core.runtime.messages import Kind, Message
from zephon_core.runtime.metrics import ConsumerMetrics
from zephon_core.runtime.replay import LaneStart, ResumePoint
from zephon_core.runtime.types import SampleBatch


class Multiplexer:
    """Reads the terminal stage's queue (in the consumer's thread) and yields whole rounds."""

    def __init__(
        self,
        lanes: list[int],
        starts: Mapping[int, LaneStart],
        ctx: Context,
        inbound: queue.Queue[Message],
        round_rows: int = 0,
    ) -> None:
        self.lanes, self.round_rows, self.ctx, self.inbound = lanes, round_rows, ctx, inbound
        self.fresh = all(starts[lane].delivered == 0 and starts[lane].window == 0 for lane in lanes)
        self.ready: dict[int, collections.deque[SampleBatch]] = {lane: collections.deque() for lane in lanes}
        self.ended: set[int] = set()
        self.leftover: dict[int, int] = {}
        self.delivered = {lane: starts[lane].delivered for lane in lanes}
        self.resume: dict[int, ResumePoint] = {lane: starts[lane].resume for lane in lanes}
        self.pos = lanes.index(min(lanes, key=lambda lane: (self.delivered[lane], lane)))  # where a resumed round stood
        self.arrived = dict.fromkeys(lanes, -1)  # seq of the lane's last message to arrive here
        self.yielded = dict.fromkeys(lanes, 0)  # microbatches that arrived
        self.finished = self.started = False
        self.consumer = ConsumerMetrics()

    @property
    def next_lane(self) -> int:
        """The lane whose microbatch comes next."""
        return self.lanes[self.pos]

    def backlog(self, lane: int) -> int:
        """Microbatches of ``lane`` waiting to be delivered."""
        return len(self.ready[lane])

    def last_arrived(self, lane: int) -> int:
        """``seq`` of the latest message of ``lane`` that arrived here (-1: none yet)."""
        return self.arrived[lane]

    def outlook(self, lane: int, in_flight: int, passed: int) -> float:
        """Microbatches of ``lane`` expected here: those waiting, and what its ``in_flight`` feeder messages
        should yield at its rate per message of the ``passed`` ones (see :mod:`~zephon_core.runtime.feeder`)."""
        rate = self.yielded[lane] / passed if passed > 0 else 0.0
        return len(self.ready[lane]) + in_flight * rate

    def _pull(self) -> None:
        try:
            msg = self.ctx.get(self.inbound)
        except Stopped:
            err = self.ctx.error
            if err is None:
                raise ZephonError("the pipeline was closed") from None
            raise err from err.__cause__  # keep the failure's own cause, not the shutdown signal
        if msg.lane in self.arrived:
            self.arrived[msg.lane] = max(self.arrived[msg.lane], msg.seq)
        if msg.kind is Kind.DATA:  # a tuple: the microbatches cut from one message (runtime/batch.py)
            got = msg.body if isinstance(msg.body, tuple) else (msg.body,)
            self.ready[msg.lane].extend(got)
            self.yielded[msg.lane] += len(got)
        elif msg.kind is Kind.LANE_END:
            self.ended.add(msg.lane)
            self.leftover[msg.lane] = int(msg.body or 0)

    def _available(self, lane: int) -> bool:
        while not self.ready[lane]:
            if lane in self.ended:
                return False
            self._pull()
        return True

    def _too_small(self) -> None:
        """The data ended before one whole round: say so instead of yielding nothing."""
        ready = sum(len(q) for q in self.ready.values())
        left = sum(self.leftover.values())
        empty = [lane for lane in self.lanes if not self.ready[lane]]
        raise ZephonError(
            f"the data ended before one whole round: a round needs a microbatch from each of this rank's "
            f"{len(self.lanes)} lanes ({self.round_rows} rows in all), but lanes {empty} had none "
            f"({ready} full microbatches and {left} leftover records in all). Use fewer lanes, a smaller "
            "microbatch_size, a smaller chunk_size (each lane needs whole chunks: lanes x chunk_size samples "
            "per round of chunks) or more data (or exhaustion='repeat')."
        )

    def __iter__(self) -> Iterator[SampleBatch]:
        return self

    def __next__(self) -> SampleBatch:
        if self.finished:
            raise StopIteration
        if self.ctx.error is not None:
            raise self.ctx.error
        if self.ctx.stop.is_set():
            raise ZephonError("the pipeline was closed; build a new Pipeline to iterate again")
        if self.pos == 0 or not self.started:
            t0 = time.perf_counter()
            ok = all(self._available(lane) for lane in self.lanes[self.pos :])
            self.consumer.wait_s += time.perf_counter() - t0
            if not ok:
                self.finished = True
                if self.fresh and not self.started:
                    self._too_small()
                raise StopIteration
            self.started = True
        lane = self.lanes[self.pos]
        batch = self.ready[lane].popleft()
        self.delivered[lane] += 1
        self.consumer.batches += 1
        if batch.resume is not None:
            self.resume[lane] = batch.resume
        self.pos = (self.pos + 1) % len(self.lanes)
        return batch
