"""Default plugin: metric snapshots pushed to a trainer's dashboard while the pipeline runs.

A trainer that logs to TensorBoard, W&B or its own store wants the loader's figures next to its
loss, without polling ``pipeline.metrics()`` from its own loop (the loop is exactly what stalls when
data is late). The :class:`MetricsReporter` is one daemon thread per pipeline: every
``metrics_every_s`` seconds it takes a snapshot of the engine's counters, adds the rates and
fractions since its previous report (:func:`~zephon_core.runtime.metrics.windowed`), and hands it to
each sink: the ``metrics_callback`` option and every plugin implementing the ``zephon_metrics`` hook.

It keeps its own previous snapshot instead of using the pipeline's metric history, so a report never
races with the training loop's own ``metrics()`` calls, and its window is exactly the interval since
the last report. A failing sink is reported once as a warning and otherwise ignored: a dashboard
outage must not stop training. When the pipeline stops (closed, failed or out of data) the thread
delivers one final snapshot, so the last partial interval is not lost, and ends.

It is the ``metrics`` observer of :mod:`zephon_core.defaults.observers`, found through the same
registry as zephon-observe's manifest writer, so the kernel starts it without importing it.
"""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from zephon_core.runtime.metrics import MIN_INTERVAL_S, windowed

Snapshot = dict[str, Any]
Sink = Callable[[Snapshot], Any]


class MetricsReporter:
    """Calls ``sinks`` with a snapshot every ``every_s`` seconds until ``stop`` is set or ``done()``.

    Args:
        snapshot: the engine's cumulative counters (``Engine.metrics``).
        sinks: what receives each report.
        every_s: the interval between reports.
        stop: set when the pipeline closes or fails (the engine's stop flag).
        done: true once the pipeline has delivered all its data.
        labels: added to every report (e.g. ``{"rank": 0, "world_size": 8}``), so a dashboard can tell
            the ranks of one job apart.
    """

    def __init__(
        self,
        snapshot: Callable[[], Snapshot],
        sinks: Sequence[Sink],
        every_s: float,
        stop: threading.Event,
        done: Callable[[], bool],
        labels: dict[str, Any] | None = None,
    ) -> None:
        self._snapshot = snapshot
        self._sinks = list(sinks)
        self._every_s = max(MIN_INTERVAL_S, float(every_s))
        self._stop = stop
        self._done = done
        self._labels = dict(labels or {})
        self._previous: Snapshot | None = None
        self._failed: set[int] = set()
        self._closed = threading.Event()
        self.reports = 0
        self._thread = threading.Thread(target=self._run, name="zephon-metrics-reporter", daemon=True)

    def start(self) -> MetricsReporter:
        self._thread.start()
        return self

    def _run(self) -> None:
        next_at = time.monotonic() + self._every_s
        while True:
            # Wake on the engine's stop flag at once; otherwise at the next report time.
            stopped = self._stop.wait(max(0.0, next_at - time.monotonic()))
            if self._closed.is_set():
                return
            finished = stopped or self._done()
            self.report(final=finished)
            if finished:
                return
            next_at += self._every_s
            now = time.monotonic()
            if next_at < now:  # a slow sink: skip the missed ticks instead of reporting in a burst
                next_at = now + self._every_s

    def report(self, final: bool = False) -> Snapshot:
        """Take one snapshot now and give it to every sink (the thread calls this; tests may too)."""
        snap = self._snapshot()
        out = snap | self._labels | {"window": windowed(snap, self._previous), "final": final}
        self._previous = snap
        self.reports += 1
        for i, sink in enumerate(self._sinks):
            try:
                sink(out)
            except Exception as exc:
                if i not in self._failed:
                    self._failed.add(i)
                    warnings.warn(
                        f"zephon metrics sink {getattr(sink, '__qualname__', sink)!r} failed: {type(exc).__name__}: "
                        f"{exc}; the pipeline goes on (further failures of this sink are not reported)",
                        RuntimeWarning,
                        stacklevel=1,
                    )
        return out

    def close(self, timeout: float = 2.0) -> None:
        """Wait for the thread's final report and its end (call after the engine's stop flag is set)."""
        if self._thread.ident is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)  # the engine's stop flag, set by its close(), wakes the thread
        self._closed.set()


def start_reporter(
    engine_snapshot: Callable[[], Snapshot],
    stop: threading.Event,
    done: Callable[[], bool],
    *,
    callback: Sink | None,
    hook: Any,
    every_s: float,
    labels: dict[str, Any],
) -> MetricsReporter | None:
    """A running reporter when anyone listens (a callback, or a plugin implementing ``zephon_metrics``), else None.

    ``hook`` is the plugin manager's ``zephon_metrics`` hook caller; nothing runs (no thread, no cost)
    when neither a callback nor a hook implementation is present.
    """
    sinks: list[Sink] = []
    if callback is not None:
        sinks.append(callback)
    if hook is not None and hook.get_hookimpls():

        def zephon_metrics_hook(snap: Snapshot) -> None:
            hook(snapshot=snap)

        sinks.append(zephon_metrics_hook)
    if not sinks:
        return None
    return MetricsReporter(engine_snapshot, sinks, every_s, stop, done, labels).start()
