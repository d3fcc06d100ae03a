"""Starting a pipeline on its first iteration: its stages planned (fused where allowed), the engine started, its
observers attached (zephon-observe's ``validate`` probe runs before the engine starts, its ``autotune`` tuner beside).
"""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING

from zephon_core.checkpoint.replay import LaneStart
from zephon_core.errors import ConfigError, PluginError, ZephonError
from zephon_core.hookspecs import ReporterFactory, StepProbe, TunerFactory
from zephon_core.ops.contract import Operator
from zephon_core.runtime.batch import BatchSpec
from zephon_core.runtime.engine import Engine, StagePlan
from zephon_core.runtime.fetch import FETCH_TIMEOUT_S
from zephon_core.runtime.fusion import fuse
from zephon_core.runtime.lifecycle import weakly
from zephon_core.runtime.metrics import timed
from zephon_core.runtime.observers import RecordedIterator, observer_for, start_observer
from zephon_core.runtime.runners import Executor, Runner, runner_crosses_processes
from zephon_core.work.contract import WorkSource, source_info
from zephon_core.work.lanes import LaneLayout

if TYPE_CHECKING:
    from zephon_core.pipeline import Shared
else:
    Shared = object


def _dropped(plan: StagePlan) -> Executor | None:
    raise ZephonError("the pipeline was dropped while it started")


class Starting(Shared):
    """The engine start and its observers (see the module docstring)."""

    def _validate(self) -> BatchSpec:
        self._opts.check()
        if self._batch is None:
            raise ConfigError("the pipeline must end with .batch(microbatch_size=...)")
        for step in self.operators:
            self.plugins.registry.get("runner", step.runner or self._opts.runner)
        return self._batch

    def _executor(self, plan: StagePlan) -> Executor | None:
        if not plan.spec.traits.has_worker:
            return None
        fn = plan.spec.worker()
        if fn is None:
            raise PluginError(f"operator {plan.spec.name!r} declares a worker but worker() returned None")
        runner: Runner = self.plugins.registry.get("runner", plan.runner).load()()
        return runner.start(timed(fn), plan.parallelism, plan.spec.name)

    def _kind_of(self, op: Operator) -> str | None:
        return self._registered.get(id(op))

    def _crosses_processes(self, runner: str) -> bool:
        """Whether runner ``runner`` runs its workers in other processes (for fusion, collation, diagnose)."""
        return runner_crosses_processes(runner, self.plugins)

    def _start(self) -> Engine:
        batch = self._validate()
        layout = self._opts.layout()
        source = self._active_source()
        info = source_info(source)
        for op in self._ops:
            op.setup(info)
        # Rows that go straight to a collation that only reads them need no copy of their own.
        share = not self._ops and batch.reads_rows_only
        self._fetch.bind([d.name for d in source.datasets], [d.reader for d in source.datasets], share_rows=share)
        if self._opts.validate != "off":  # the ``validate`` observer probes the steps on the first records
            probe: StepProbe = observer_for("validate", self.plugins).load()
            self._validation = probe(
                self._opts.validate, fetch=self._fetch, steps=self._ops, source=source, kind_of=self._kind_of
            )
        runner, timeout = self._opts.runner, self._opts.timeout_s
        fetch_timeout = self._fetch.timeout_s or timeout or FETCH_TIMEOUT_S
        plans = [StagePlan(self._fetch, self._fetch.runner or runner, self._fetch.parallelism, fetch_timeout)]
        plans += [StagePlan(op, op.runner or runner, op.parallelism, op.timeout_s or timeout) for op in self._ops]
        if self._opts.fuse:
            plans = fuse(plans, StagePlan, self._crosses_processes)
        batch_runner = batch.runner or batch.default_runner(runner, self._crosses_processes)
        batch_plan = StagePlan(batch, batch_runner, batch.parallelism, batch.timeout_s or timeout)
        view = next((v for op in reversed(self._ops) if (v := op.training_view()) is not None), None)
        starts = {lane: self._starts.get(lane, LaneStart()) for lane in layout.owned}
        tuner: TunerFactory | None = observer_for("autotune", self.plugins).load() if self._opts.autotune else None
        budget = self._opts.cpu_budget or len(plans) + 1 + (os.cpu_count() or 1)
        self._engine = Engine(
            self._feed_source(source, layout),
            self._fetch,
            plans,
            batch,
            batch_plan,
            layout,
            self._window_chunks,
            starts,
            weakly(self._executor, _dropped),
            weakly(self.describe_samples, lambda lineage: "(unknown: the pipeline was dropped)"),
            view,
            queue_depth=self._opts.queue_depth,
            max_inflight_bytes=self._opts.max_inflight_bytes,
            tuner=None if tuner is None else functools.partial(tuner, budget=budget),
        )
        if self._opts.trace:
            self._engine.record_trace()
        self._start_observers(self._engine, source, layout)
        return self._engine

    def _start_observers(self, engine: Engine, source: WorkSource, layout: LaneLayout) -> None:
        """The manifest writer and the metrics reporter (when a callback or a ``zephon_metrics`` hook listens):
        observers registered through ``zephon_register_observers``, looked up in this pipeline's plugin manager."""
        opts = self._opts
        self._delivered = engine
        if opts.manifest is not None:
            try:
                self._manifest = start_observer(
                    self.plugins,
                    "manifest",
                    opts.manifest,
                    options=opts,
                    source=source,
                    lanes_per_rank=layout.lanes_per_rank,
                )
            except BaseException:
                engine.close()
                raise
            self._delivered = RecordedIterator(engine, self._manifest)
        hook = self.plugins.pm.hook.zephon_metrics
        if opts.metrics_callback is None and not hook.get_hookimpls():
            return  # nobody listens: no reporter thread, and its module is never imported
        start_reporter: ReporterFactory = observer_for("metrics", self.plugins).load()
        self._reporter = start_reporter(
            engine.metrics,
            engine.ctx.stop,
            lambda: engine.finished,
            callback=opts.metrics_callback,
            hook=hook,
            every_s=opts.metrics_every_s,
            labels={"rank": opts.dp_rank, "world_size": opts.dp_world_size},
        )
