"""One rank's running pipeline: source thread, stages, and the lane multiplexer.

The source walks this rank's lanes, computes each lane's next chunk directly from the work source
(chunk ``g = local_index * L + lane``), and sends a flush sentinel after every ``K`` chunks of a
lane. All lanes share the stages; every accumulator keeps separate state per lane, so a lane's
output does not depend on which other lanes run beside it, and the interleaving of lanes is free
to follow demand.

The multiplexer (in the consumer's thread) yields microbatches round-robin over the rank's lanes,
holding back lanes that are ahead, and only starts a round when every lane of the round has a
microbatch, so a rank yields whole rounds.
"""

from __future__ import annotations

import collections
import queue
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from zephon_core.errors import ZephonError
from zephon_core.ops.contract import Lineage, Operator
from zephon_core.runtime.runners import Executor
from zephon_core.runtime.stage import DATA, FLUSH, LANE_END, STOP, Context, Stage, Stopped
from zephon_core.runtime.types import SampleBatch
from zephon_core.work.source import StaticMixtureWorkSource

MAX_READY_PER_LANE = 2


@dataclass(frozen=True, slots=True)
class LaneStart:
    """Where a lane begins: replay ``window`` skipping ``skip`` records; ``delivered`` microbatches so far."""

    window: int = 0
    skip: int = 0
    delivered: int = 0


@dataclass(frozen=True, slots=True)
class StagePlan:
    op: Operator
    runner: str
    parallelism: int


class Engine:
    """Runs a pipeline for the lanes one rank owns; created by :class:`~zephon_core.pipeline.Pipeline`."""

    def __init__(
        self,
        source: StaticMixtureWorkSource,
        stages: list[StagePlan],
        lanes: list[int],
        num_lanes: int,
        flush_every: int,
        starts: dict[int, LaneStart],
        make_executor: Callable[[StagePlan], Executor | None],
        describe_samples: Callable[[list[Lineage]], str],
        view: Any,
        queue_depth: int = 4,
    ) -> None:
        self.source = source
        self.lanes = lanes
        self.num_lanes = num_lanes
        self.flush_every = flush_every
        self.starts = starts
        self.ctx = Context()
        self.executors: list[Executor] = []
        self.stages: list[Stage] = []
        self.next_local = {lane: starts[lane].window * flush_every for lane in lanes}
        self.ready: dict[int, collections.deque[SampleBatch]] = {lane: collections.deque() for lane in lanes}
        self.ended: set[int] = set()
        self.leftover: dict[int, int] = {}
        self.delivered = {lane: starts[lane].delivered for lane in lanes}
        self.resume = {lane: (starts[lane].window, starts[lane].skip) for lane in lanes}
        fewest = min(lanes, key=lambda lane: (self.delivered[lane], lane))
        self.pos = lanes.index(fewest)
        self.finished = False
        self.started = False
        queues: list[queue.Queue[Any]] = [queue.Queue(maxsize=queue_depth) for _ in range(len(stages) + 1)]
        self.head, self.tail = queues[0], queues[-1]
        try:
            for i, plan in enumerate(stages):
                ex = make_executor(plan)
                if ex is not None:
                    self.executors.append(ex)
                terminal = i == len(stages) - 1
                self.stages.append(
                    Stage(
                        plan.op,
                        ex,
                        queues[i],
                        queues[i + 1],
                        self.ctx,
                        window=max(2, 2 * plan.parallelism),
                        new_accumulator=self._acc_factory(plan.op, terminal),
                        describe_samples=describe_samples,
                        terminal=terminal,
                        view=view if terminal else None,
                    )
                )
        except BaseException:
            self.close()
            raise
        self.source_thread = threading.Thread(target=self._run_source, name="zephon-source", daemon=True)
        for st in self.stages:
            st.start()
        self.source_thread.start()

    def _acc_factory(self, op: Operator, terminal: bool) -> Callable[[int], Any]:
        if not terminal:
            return op.new_accumulator
        starts = self.starts

        def make(lane: int) -> Any:
            s = starts[lane]
            return op.new_accumulator(lane, window=s.window, skip=s.skip, index=s.delivered)  # type: ignore[call-arg]

        return make

    # -- source --------------------------------------------------------------------------------
    def _pick_lane(self, active: list[int], emitted: dict[int, int]) -> int:
        hungry = [lane for lane in active if len(self.ready[lane]) < MAX_READY_PER_LANE] or active
        return min(hungry, key=lambda lane: (emitted[lane], lane))

    def _run_source(self) -> None:
        ctx, k, L = self.ctx, self.flush_every, self.num_lanes
        active = list(self.lanes)
        emitted = {lane: 0 for lane in self.lanes}
        try:
            while active:
                lane = self._pick_lane(active, emitted)
                c = self.next_local[lane]
                chunk = self.source.chunk(c * L + lane)
                if chunk is None:
                    if not k or c % k:
                        ctx.put(self.head, (FLUSH, lane, None))
                    ctx.put(self.head, (LANE_END, lane, None))
                    active.remove(lane)
                    continue
                ctx.put(self.head, (DATA, lane, chunk))
                self.next_local[lane] = c + 1
                emitted[lane] += 1
                if k and (c + 1) % k == 0:
                    ctx.put(self.head, (FLUSH, lane, None))
            ctx.put(self.head, (STOP, -1, None))
        except Stopped:
            pass
        except BaseException as exc:
            ctx.fail(exc)

    # -- multiplexer ---------------------------------------------------------------------------
    def _pull(self) -> None:
        try:
            kind, lane, obj = self.ctx.get(self.tail)
        except Stopped:
            raise self.ctx.error or ZephonError("pipeline was closed") from None
        if kind == DATA:
            self.ready[lane].append(obj)
        elif kind == LANE_END:
            self.ended.add(lane)
            self.leftover[lane] = int(obj or 0)

    def _available(self, lane: int) -> bool:
        while not self.ready[lane]:
            if lane in self.ended:
                return False
            self._pull()
        return True

    def __iter__(self) -> Iterator[SampleBatch]:
        return self

    def __next__(self) -> SampleBatch:
        if self.finished:
            raise StopIteration
        if self.ctx.error is not None:
            raise self.ctx.error
        if self.pos == 0 or not self.started:
            # A round starts only when every lane in it has a microbatch: ranks yield whole rounds.
            if not all(self._available(lane) for lane in self.lanes[self.pos :]):
                self.finished = True
                raise StopIteration
            self.started = True
        lane = self.lanes[self.pos]
        batch = self.ready[lane].popleft()
        self.delivered[lane] += 1
        if batch.resume is not None:
            self.resume[lane] = (batch.resume.window, batch.resume.skip)
        self.pos = (self.pos + 1) % len(self.lanes)
        return batch

    # -- state ---------------------------------------------------------------------------------
    def lane_states(self) -> dict[int, dict[str, Any]]:
        k = self.flush_every
        out: dict[int, dict[str, Any]] = {}
        for lane in self.lanes:
            window, skip = self.resume[lane]
            first = window * k if k else 0
            last = self.next_local[lane]
            out[lane] = {
                "window": window,
                "skip": skip,
                "delivered": self.delivered[lane],
                "replay_from_chunk": first * self.num_lanes + lane,
                "inflight_chunks": [c * self.num_lanes + lane for c in range(first, last)],
            }
        return out

    def close(self) -> None:
        self.ctx.stop.set()
        for st in self.stages:
            st.join(timeout=5)
        if hasattr(self, "source_thread") and self.source_thread.is_alive():
            self.source_thread.join(timeout=5)
        for ex in self.executors:
            ex.close()
        self.executors = []
