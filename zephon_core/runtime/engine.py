"""One rank's running pipeline: feeder thread → stages → multiplexer, wired by bounded queues.

All lanes of the rank share the stages; every accumulator keeps separate state per lane, so a lane's
output does not depend on which other lanes run beside it, and lanes may interleave as demand says.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from zephon_core.hookspecs import Tunable, Tuner
from zephon_core.ops.contract import Lineage
from zephon_core.runtime.batch import BatchSpec, BatchStage
from zephon_core.runtime.context import Context
from zephon_core.runtime.feeder import Feeder
from zephon_core.runtime.fetch import FetchStage
from zephon_core.runtime.flow import ByteQueue
from zephon_core.runtime.metrics import TRACE_EVENTS, chrome_trace
from zephon_core.runtime.multiplexer import Multiplexer
from zephon_core.runtime.replay import LaneStart, lane_state
from zephon_core.runtime.runners import Executor, ReportsMetrics, Resizable
from zephon_core.runtime.stage import Stage, StageSpec
from zephon_core.runtime.types import SampleBatch
from zephon_core.work.contract import WorkSource
from zephon_core.work.lanes import LaneLayout

GROUPS_PER_BUDGET = 32
"""A fetch read group is at most this fraction of the byte budget, so many fit in flight at once."""


@dataclass(frozen=True, slots=True)
class StagePlan:
    """One step to run: what (fetch, an operator or batch), on which runner, with how many workers."""

    spec: StageSpec
    runner: str
    parallelism: int
    timeout_s: float | None = None


class Engine:
    """Runs a pipeline for the lanes one rank owns; created by :class:`~zephon_core.pipeline.Pipeline`.

    Args:
        fetch: the fetch stage (also the spec of the first plan): its read groups follow the byte budget.
        plans: fetch, then the operators; ``batch`` runs as ``batch_plan`` says.
        flush_every: chunks per window (0: never flush before a lane's end).
        starts: where each owned lane starts (from a checkpoint, or the beginning).
        make_executor: starts the workers of one plan (None when it has no worker).
        max_inflight_bytes: the byte budget shared by the queues (None: count items only).
        tuner: makes the tuner (``options(autotune=True)``) that adjusts parallelism through :meth:`resize`.
    """

    def __init__(
        self,
        source: WorkSource,
        fetch: FetchStage,
        plans: list[StagePlan],
        batch: BatchSpec,
        batch_plan: StagePlan,
        layout: LaneLayout,
        flush_every: int,
        starts: Mapping[int, LaneStart],
        make_executor: Callable[[StagePlan], Executor | None],
        describe_samples: Callable[[list[Lineage]], str],
        view: Callable[[dict[str, Any]], dict[str, Any]] | None,
        queue_depth: int = 4,
        max_inflight_bytes: int | None = None,
        tuner: Callable[[Tunable], Tuner] | None = None,
    ) -> None:
        self.layout, self.lanes, self.flush_every, self.ctx = layout, layout.owned, flush_every, Context()
        self.executors: list[Executor] = []
        self.stages: list[Stage] = []
        # set once every stage exists; close() may run before that (a stage that fails to start)
        self.tuner: Tuner | None = None
        self.feeder_thread: threading.Thread | None = None
        n_queues = len(plans) + 2
        share = None if max_inflight_bytes is None else max(1, max_inflight_bytes // n_queues)
        queues = [ByteQueue(queue_depth, share) for _ in range(n_queues)]
        group_bytes = None if max_inflight_bytes is None else max_inflight_bytes // GROUPS_PER_BUDGET
        fetch.limit_group_bytes(group_bytes, lambda: queues[1].bytes_per_record)  # what fetch puts out
        self.mux = Multiplexer(self.lanes, starts, self.ctx, queues[-1], len(self.lanes) * batch.microbatch_size)
        self.feeder = Feeder(source, layout, flush_every, starts, self.ctx, queues[0], self.mux, fetch.group_size)
        try:
            for i, plan in enumerate([*plans, batch_plan]):
                ex = make_executor(plan)
                if ex is not None:
                    self.executors.append(ex)
                common = (ex, queues[i], queues[i + 1], self.ctx, max(2, 2 * plan.parallelism))
                run, timeout, par = plan.runner, plan.timeout_s, plan.parallelism
                if i == len(plans):
                    stage: Stage = BatchStage(
                        batch, *common, starts=starts, view=view, describe_samples=describe_samples,
                        runner=run, timeout_s=timeout, parallelism=par,
                    )  # fmt: skip
                else:
                    stage = Stage(
                        plan.spec, *common, new_accumulator=plan.spec.new_accumulator,
                        describe_samples=describe_samples, runner=run, timeout_s=timeout, parallelism=par,
                    )  # fmt: skip
                self.stages.append(stage)
        except BaseException:
            self.close()
            raise
        self.started_at = time.monotonic()
        self.tuner = tuner(self) if tuner is not None else None
        self.feeder_thread = threading.Thread(target=self.feeder.run, name="zephon-feeder", daemon=True)
        for st in self.stages:
            st.start()
        self.feeder_thread.start()
        if self.tuner is not None:
            self.tuner.start()

    def __iter__(self) -> Engine:
        return self

    def __next__(self) -> SampleBatch:
        return next(self.mux)

    @property
    def finished(self) -> bool:
        return self.mux.finished

    @property
    def leftover(self) -> dict[int, int]:
        return self.mux.leftover

    @property
    def next_lane(self) -> int:
        return self.mux.next_lane

    def lane_states(self) -> dict[int, dict[str, Any]]:
        """Every owned lane's checkpoint entry, as of the last microbatch handed out."""
        return {
            lane: lane_state(lane, self.mux.resume[lane], self.mux.delivered[lane], self.layout, self.flush_every)
            for lane in self.lanes
        }

    def metrics(self) -> dict[str, Any]:
        """A JSON-compatible snapshot of every stage's cumulative counters (see :mod:`runtime.metrics`)."""
        stages = []
        for st in self.stages:
            m = st.metrics
            row: dict[str, Any] = {
                "name": m.name,
                "runner": m.runner,
                "parallelism": m.parallelism,
                "has_worker": st.executor is not None,
                **m.counters(),
                "bytes_in": st.inbound.total_bytes if isinstance(st.inbound, ByteQueue) else 0,
                "bytes_out": st.outbound.total_bytes if isinstance(st.outbound, ByteQueue) else 0,
                "queue_fill": st.inbound.qsize() / max(1, st.inbound.maxsize),
                "window_fill": st.pending.qsize() / max(1, st.pending.maxsize),
                "in_flight": st.pending.qsize(),
                "latency_ms": m.percentiles(),
            }
            if isinstance(st.executor, ReportsMetrics):
                row["executor"] = st.executor.metrics()
            stages.append(row)
        return {
            "elapsed_s": time.monotonic() - self.started_at,
            "autotune": self.tuner.report() if self.tuner is not None else None,
            "stages": stages,
            "source": {"chunks": self.chunks_fed()},
            "consumer": {"batches": self.mux.consumer.batches, "wait_s": self.mux.consumer.wait_s},
        }

    def resizable(self) -> dict[str, int]:
        """The parallelism of every stage whose executor can be resized (the autotuner's knobs)."""
        return {st.name: st.metrics.parallelism for st in self.stages if isinstance(st.executor, Resizable)}

    def resize(self, stage: str, parallelism: int) -> None:
        """Run ``parallelism`` workers in ``stage`` (one of :meth:`resizable`) from now on; no output changes."""
        st = next(st for st in self.stages if st.name == stage and isinstance(st.executor, Resizable))
        cast(Resizable, st.executor).resize(parallelism)
        st.metrics.parallelism = parallelism
        st.pending.maxsize = max(2, 2 * parallelism)  # the reorder window grows with the workers

    def record_trace(self, on: bool = True) -> None:
        """Start (or stop) keeping every task's span for :meth:`trace`."""
        for st in self.stages:
            st.metrics.trace = collections.deque(maxlen=TRACE_EVENTS) if on else None

    def trace(self) -> dict[str, Any]:
        """The recorded task spans as a Chrome trace (see :func:`~zephon_core.runtime.metrics.chrome_trace`)."""
        return chrome_trace([st.metrics for st in self.stages])

    def chunks_fed(self) -> int:
        """Chunks the feeder has sent into the pipeline so far (for back-pressure checks and metrics)."""
        return sum(self.feeder.chunks.values())

    def close(self, grace_s: float = 2.0) -> None:
        """Stop every thread and worker; returns within about ``grace_s`` plus the executors' own close
        (a thread stuck in a user function, a hung task, is a daemon and is abandoned after ``grace_s``)."""
        self.ctx.stop.set()
        if self.tuner is not None:
            self.tuner.stop()
        deadline = time.monotonic() + grace_s
        threads = [t for st in self.stages for t in st.threads] + [t for t in [self.feeder_thread] if t is not None]
        for t in threads:
            if t.ident is not None and t is not threading.current_thread():
                t.join(max(0.0, deadline - time.monotonic()))
        for ex in self.executors:
            ex.close()
        self.executors = []
