"""Online autotuning: raise the parallelism of the step that limits throughput, within a CPU budget.

Parallelism and runners are order-neutral by construction (a reorder window restores sequence), so a
tuner may change them while the pipeline runs without changing a single batch. Every ``interval_s``
the tuner reads the windowed metrics, names the bottleneck (:mod:`zephon_core.runtime.diagnose`)
and gives that step one more worker if the budget allows. The next interval judges the change: if
delivered throughput did not improve, the step goes back and is not raised again (hill climbing
with memory), so the tuner settles instead of oscillating.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from zephon_core.runtime.diagnose import diagnose
from zephon_core.runtime.metrics import windowed
from zephon_core.runtime.runners import Resizable
from zephon_core.runtime.stage import Stage

GAIN = 1.05
"""A change is kept when throughput rose by at least this factor."""


class AutoTuner:
    """Runs on its own daemon thread beside an engine (see the module docstring)."""

    def __init__(
        self,
        stages: list[Stage],
        snapshot: Callable[[], dict[str, Any]],
        budget: int,
        interval_s: float = 1.0,
    ) -> None:
        self.stages = {st.name: st for st in stages if isinstance(st.executor, Resizable)}
        self.snapshot = snapshot
        self.budget = budget
        self.interval_s = interval_s
        self.history: list[dict[str, Any]] = []
        self.saturated: set[str] = set()
        self._trial: tuple[str, int, float] | None = None  # (stage, previous parallelism, throughput before)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="zephon-autotune", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def settings(self) -> dict[str, int]:
        return {name: st.metrics.parallelism for name, st in self.stages.items()}

    def report(self) -> dict[str, Any]:
        return {"parallelism": self.settings(), "budget": self.budget, "changes": list(self.history[-50:])}

    def _set(self, st: Stage, parallelism: int) -> None:
        ex = st.executor
        if not isinstance(ex, Resizable):
            return
        ex.resize(parallelism)
        st.metrics.parallelism = parallelism
        st.pending.maxsize = max(2, 2 * parallelism)  # the reorder window grows with the workers

    def _run(self) -> None:
        prev = self.snapshot()
        while not self._stop.wait(self.interval_s):
            try:
                now = self.snapshot()
            except Exception:  # the pipeline is closing
                return
            w = windowed(now, prev)
            prev = now
            self.step(w, now["elapsed_s"])

    def step(self, w: dict[str, Any], t: float) -> None:
        """One decision from one window of metrics (public so tests can drive the tuner directly)."""
        throughput = w["consumer"]["batches_per_s"]
        if self._trial is not None:
            name, before_p, before_tp = self._trial
            self._trial = None
            trial = self.stages[name]
            if throughput < before_tp * GAIN:
                self._set(trial, before_p)
                self.saturated.add(name)
                self.history.append({"t": round(t, 1), "stage": name, "parallelism": before_p, "kept": False})
            else:
                self.history.append({"t": round(t, 1), "stage": name, "parallelism": trial.metrics.parallelism, "kept": True})
            return
        d = diagnose(w)
        st = self.stages.get(d.stage)
        if st is None or d.stage in self.saturated:
            return
        used = sum(s.metrics.parallelism for s in self.stages.values())
        if used >= self.budget:
            return
        p = st.metrics.parallelism
        self._trial = (d.stage, p, throughput)
        self._set(st, p + 1)

