"""What a running pipeline answers (none of it changes the data): where a batch came from, live metrics, the
bottleneck, run facts. A part of :class:`~zephon_core.pipeline.Pipeline`, where its methods are documented."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from zephon_core.errors import ZephonError
from zephon_core.ops.contract import Lineage
from zephon_core.runtime.diagnose import Diagnosis, diagnose
from zephon_core.runtime.metrics import window_over
from zephon_core.runtime.types import SampleBatch
from zephon_core.work.contract import Pointer, ReportsExhaustion, pointer_of
from zephon_core.work.ids import dataset_of, split_sample_id

if TYPE_CHECKING:
    from zephon_core.pipeline import Shared
else:
    Shared = object


class Answers(Shared):
    """Questions about the data and the run (see the module docstring)."""

    def explain(self, batch: SampleBatch) -> list[list[Pointer]]:
        """Which source samples each row of ``batch`` was made from."""
        source = self._active_source()
        return [[pointer_of(source, sid) for sid in lin] for lin in batch.lineage]

    def datasets_of(self, batch: SampleBatch) -> list[list[str]]:
        """The dataset of every source sample behind each row of ``batch`` (read from the ids)."""
        names = [d.name for d in self.source.datasets]
        return [[names[dataset_of(sid)] for sid in lin] for lin in batch.lineage]

    def describe_samples(self, lineage: list[Lineage]) -> str:
        """Names the source samples behind some lineage, for error messages."""
        ids = [sid for lin in lineage for sid in lin]
        source = self._active or self.source
        shown = []
        for sid in ids[:3]:
            try:
                p = pointer_of(source, sid)
                shard = source.datasets[dataset_of(sid)].shards[p.shard].id
                shown.append(f"{p.dataset}[shard {p.shard} ({shard}), index {p.index}]")
            except Exception:
                chunk, offset = split_sample_id(sid)
                shown.append(f"chunk {chunk} offset {offset}")
        more = f" and {len(ids) - 3} more" if len(ids) > 3 else ""
        return (", ".join(shown) + more) if shown else "(none)"

    def metrics(self, window_s: float = 10.0) -> dict[str, Any]:
        """A JSON-compatible snapshot of live metrics (empty before the pipeline starts): cumulative counters per
        step, plus rates and fractions (worker busy, input wait, output blocked, consumer wait) over at least the
        last ``window_s`` seconds. Reads do not reset one another: a ``diagnose()`` right after sees its window."""
        eng = self._engine
        if eng is None:
            return {"elapsed_s": 0.0, "stages": [], "source": {"chunks": 0}, "consumer": {}, "window": {}}
        with self._metrics_lock:
            snap = eng.metrics()
            window = window_over(self._metric_history, snap, window_s)
        return snap | {"window": window}

    def trace(self) -> dict[str, Any]:
        """Worker task spans recorded since the pipeline started, as a Chrome/Perfetto trace (JSON data); recording
        is switched on by ``options(trace=True)`` and keeps the last 200,000 tasks per step."""
        if self._engine is None:
            raise ZephonError("trace() needs a running pipeline: iterate it first")
        return self._engine.trace()

    def diagnose(self, window_s: float = 10.0) -> Diagnosis:
        """Which step limits throughput, the evidence, and what to change (``str()`` is the sentence)."""
        if self._engine is None:
            raise ZephonError("diagnose() needs a running pipeline: iterate it first")
        return diagnose(self.metrics(window_s)["window"], self._crosses_processes)

    def stats(self) -> dict[str, Any]:
        """Run facts: records left over in partial microbatches per lane when the data ended, which dataset ran out
        at which draw in this rank's lanes (sources with an ``exhaustion_report``), and the records this rank's
        readers skipped (``on_error="skip"``) per dataset (counted again when a resume replays their window)."""
        eng = self._engine
        source = self._active or self.source
        report = source.exhaustion_report if isinstance(source, ReportsExhaustion) else None
        names = [d.name for d in self.source.datasets]
        dropped = eng.stages[0].metrics.dropped if eng and eng.stages else {}  # fetch: a reader's skip is its only drop
        return {
            "leftover_records": dict(eng.leftover) if eng else {},
            "finished": bool(eng and eng.finished),
            "chunks_fed": eng.chunks_fed() if eng else 0,
            "exhausted": [str(e) for e in report(self._opts.layout().owned)] if report is not None else [],
            "skipped_records": {names[d] if 0 <= d < len(names) else "?": n for d, n in sorted(dropped.items())},
            "validation": dict(self._validation),
        }
