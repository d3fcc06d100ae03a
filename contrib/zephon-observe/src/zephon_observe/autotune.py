"""Online autotuning (``options(autotune=True)``): raise the parallelism of the step that limits throughput.

Parallelism and runners are order-neutral by construction (a reorder window restores sequence), so a
tuner may change them while the pipeline runs without changing a single batch. Every ``interval_s``
the tuner reads the windowed metrics, names the bottleneck (:func:`~zephon_core.plugin_api.diagnose`)
and gives that step one more worker if the budget allows. The next interval judges the change: if
delivered throughput did not improve, the step goes back and is not raised again (hill climbing
with memory), so the tuner settles instead of oscillating.

Registered as the observer of the ``autotune`` option (:mod:`zephon_observe.plugin`); the kernel
hands it the running engine as a :class:`~zephon_core.hookspecs.Tunable` (its metrics, and the
parallelism of the steps it may resize), within the ``cpu_budget`` option's workers.
"""

from __future__ import annotations

import threading
from typing import Any

from zephon_core.hookspecs import Tunable
from zephon_core.plugin_api import diagnose, windowed

GAIN = 1.05
"""A change is kept when throughput rose by at least this factor."""


class AutoTuner:
    """Runs on its own daemon thread beside an engine (see the module docstring)."""

    def __init__(self, engine: Tunable, *, budget: int, interval_s: float = 1.0) -> None:
        self.engine = engine
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
        return self.engine.resizable()

    def report(self) -> dict[str, Any]:
        return {"parallelism": self.settings(), "budget": self.budget, "changes": list(self.history[-50:])}

    def _run(self) -> None:
        prev = self.engine.metrics()
        while not self._stop.wait(self.interval_s):
            try:
                now = self.engine.metrics()
            except Exception:  # the pipeline is closing
                return
            w = windowed(now, prev)
            prev = now
            self.step(w, now["elapsed_s"])

    def step(self, w: dict[str, Any], t: float) -> None:
        """One decision from one window of metrics (public so tests can drive the tuner directly)."""
        throughput = w["consumer"]["batches_per_s"]
        settings = self.settings()
        if self._trial is not None:
            name, before_p, before_tp = self._trial
            self._trial = None
            if throughput < before_tp * GAIN:
                self.engine.resize(name, before_p)
                self.saturated.add(name)
                self.history.append({"t": round(t, 1), "stage": name, "parallelism": before_p, "kept": False})
            else:
                self.history.append({"t": round(t, 1), "stage": name, "parallelism": settings[name], "kept": True})
            return
        d = diagnose(w)
        if d.stage not in settings or d.stage in self.saturated:
            return
        if sum(settings.values()) >= self.budget:
            return
        p = settings[d.stage]
        self._trial = (d.stage, p, throughput)
        self.engine.resize(d.stage, p + 1)
