"""Live metrics of a running pipeline: cheap counters per stage, snapshots, and windowed rates.

Every stage keeps cumulative counters (:data:`COUNTERS`), a few additions per message and per task,
so always on. A window's rates are the difference of two snapshots: a reader keeps its own earlier
one (the reporter, the tuner, ``zephon profile``), or :func:`window_over` picks one from a shared
ring. Worker time is measured where the worker runs (:class:`TimedWorker`), right on every runner.
``ZEPHON_METRICS=off`` (read once, at import) turns per-task timing off, only to measure its cost
(``benchmarks/bench_kernel.py --metrics-overhead``): busy fractions, latencies and traces read zero."""

from __future__ import annotations

import collections
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from zephon_core.errors import ConfigError
from zephon_core.ops.contract import WorkerFn

MIN_INTERVAL_S = 0.05
"""The shortest reporting interval of ``options(metrics_every_s=...)`` (a snapshot costs about a millisecond)."""

LATENCY_SAMPLES = 2048
"""Task durations kept per stage for the percentiles (the most recent ones)."""

TRACE_EVENTS = 200_000
"""Task spans kept per stage for a trace (the most recent ones)."""

ENABLED = os.environ.get("ZEPHON_METRICS", "on").strip().lower() not in {"off", "0", "false", "no"}
"""Per-task timing on (the default); see the module docstring for ``ZEPHON_METRICS=off``."""

COUNTERS = tuple("records_in records_out tasks busy_s acc_busy_s wait_input_s window_full_s blocked_output_s".split())
"""A stage's cumulative counters (:meth:`StageMetrics.counters`), which windows are differences of."""


@dataclass(frozen=True, slots=True)
class Timed:
    """A worker's result with when and where it ran (``time.time()`` seconds of the worker's host); a
    dataclass, not a named tuple: Ray's serializer rebuilds named tuples without their fields."""

    result: Any
    start: float
    end: float
    worker: str


_names = threading.local()


def _worker_name() -> str:
    """``"pid:thread"`` of the calling worker, computed once per thread (``os.getpid()`` is a system call)."""
    name: str | None = getattr(_names, "name", None)
    if name is None:
        name = _names.name = f"{os.getpid()}:{threading.get_ident()}"
    return name


def _forget_names() -> None:
    global _names
    _names = threading.local()  # a forked worker inherits the parent's thread-local: a stale pid


os.register_at_fork(after_in_child=_forget_names)


@dataclass(frozen=True, slots=True)
class TimedWorker:
    """Wraps a worker function so every task reports its own duration, on any runner."""

    fn: WorkerFn

    @property
    def __wrapped__(self) -> WorkerFn:
        return self.fn

    def __call__(self, task: Any) -> Timed:
        start = time.time()
        result = self.fn(task)
        return Timed(result, start, time.time(), _worker_name())


def timed(fn: WorkerFn) -> Callable[[Any], Any]:
    """``fn`` wrapped to time every task (:class:`TimedWorker`), or ``fn`` itself when metrics are off."""
    return TimedWorker(fn) if ENABLED else fn


class StageMetrics:
    """Cumulative counters of one stage (see the module docstring)."""

    def __init__(self, name: str, runner: str, parallelism: int) -> None:
        self.name, self.runner, self.parallelism = name, runner, parallelism
        self.records_in = self.records_out = self.tasks = 0  # the COUNTERS
        self.busy_s = self.acc_busy_s = self.wait_input_s = self.window_full_s = self.blocked_output_s = 0.0
        self.dropped: dict[int, int] = {}  # records its workers dropped, by dataset number
        self.latencies: collections.deque[float] = collections.deque(maxlen=LATENCY_SAMPLES)
        self.trace: collections.deque[tuple[float, float, str]] | None = None

    def task_done(self, timed: Timed) -> None:
        """Count one finished task. Only the stage's emitter thread calls this, so no lock: readers
        copy the deques (atomic under the GIL) and read plain numbers."""
        if not ENABLED:
            return
        d = max(0.0, timed.end - timed.start)
        self.tasks += 1
        self.busy_s += d
        self.latencies.append(d)
        if self.trace is not None:
            self.trace.append((timed.start, timed.end, timed.worker))

    def counters(self) -> dict[str, float]:
        """The cumulative counters (:data:`COUNTERS`, for windowed differences)."""
        return {k: vars(self)[k] for k in COUNTERS}

    def percentiles(self) -> dict[str, float]:
        """Task durations (ms) of the most recent tasks at the 50th, 90th and 99th percentile."""
        lat = sorted(self.latencies.copy())
        n = len(lat)
        return {f"p{q}": 1000 * lat[min(n - 1, q * n // 100)] if n else 0.0 for q in (50, 90, 99)}


class ConsumerMetrics:
    """The training loop's side: batches taken and time spent waiting for them."""

    def __init__(self) -> None:
        self.batches = 0
        self.wait_s = 0.0


_FRACTIONS: tuple[tuple[str, str], ...] = (
    ("accumulator_busy", "acc_busy_s"),
    ("input_wait", "wait_input_s"),
    ("window_full", "window_full_s"),
    ("output_blocked", "blocked_output_s"),
)
"""Fractions of the window (name, counter of seconds) that :func:`windowed` reports beside ``worker_busy``."""


def windowed(now: dict[str, Any], then: dict[str, Any] | None) -> dict[str, Any]:
    """Rates and fractions between two snapshots (``then`` None: since the start)."""
    dt = max(1e-9, now["elapsed_s"] - (then["elapsed_s"] if then else 0.0))
    old = {s["name"]: s for s in then["stages"]} if then else {}
    stages = []
    for s in now["stages"]:
        o = old.get(s["name"], {})
        d = {k: s[k] - o.get(k, 0) for k in COUNTERS}
        w = {"name": s["name"], "runner": s.get("runner", ""), "parallelism": s.get("parallelism", 1)}
        w |= {f"{k}_per_s": d[k] / dt for k in ("records_in", "records_out", "tasks")}
        w["worker_busy"] = min(1.0, d["busy_s"] / (dt * max(1, s["parallelism"]))) if s["has_worker"] else 0.0
        w |= {name: min(1.0, d[k] / dt) for name, k in _FRACTIONS}
        stages.append(w)
    c, oc = now["consumer"], (then["consumer"] if then else {"batches": 0, "wait_s": 0.0})
    consumer = {
        "batches_per_s": (c["batches"] - oc["batches"]) / dt,
        "wait": min(1.0, (c["wait_s"] - oc["wait_s"]) / dt),
    }
    chunks_per_s = (now["source"]["chunks"] - (then["source"]["chunks"] if then else 0)) / dt
    return {"window_s": dt, "stages": stages, "consumer": consumer, "source": {"chunks_per_s": chunks_per_s}}


HISTORY_EVERY_S = 0.25
"""The shortest gap between two snapshots kept for :func:`window_over` (reads closer together add none)."""

HISTORY_KEEP_S = 60.0
"""How far back :func:`window_over` keeps snapshots (further for a longer ``window_s``)."""


def window_over(history: collections.deque[dict[str, Any]], snap: dict[str, Any], window_s: float) -> dict[str, Any]:
    """Rates and fractions over at least the last ``window_s`` seconds (positive, else a :class:`ConfigError`)
    before ``snap``. ``history``: earlier snapshots all readers of one pipeline share (``metrics()``,
    ``diagnose()``, a scrape; the caller holds its lock). The window starts at the newest kept one at
    least ``window_s`` old, so no read shortens another's; ``snap`` is kept every :data:`HISTORY_EVERY_S`."""
    if isinstance(window_s, bool) or not isinstance(window_s, (int, float)) or not 0 < window_s < float("inf"):
        raise ConfigError(f"metrics: window_s must be a positive number of seconds, got {window_s!r}")
    now = snap["elapsed_s"]
    ref = next((h for h in reversed(history) if now - h["elapsed_s"] >= window_s), None)
    if not history or now - history[-1]["elapsed_s"] >= HISTORY_EVERY_S:  # only what windowed() reads of it
        stages = [{"name": s["name"], **{k: s[k] for k in COUNTERS}} for s in snap["stages"]]
        consumer = {"batches": snap["consumer"]["batches"], "wait_s": snap["consumer"]["wait_s"]}
        source = {"chunks": snap["source"]["chunks"]}
        history.append({"elapsed_s": now, "stages": stages, "consumer": consumer, "source": source})
    keep = max(HISTORY_KEEP_S, 2 * window_s)
    while len(history) > 1 and now - history[1]["elapsed_s"] >= keep:  # history[1] can start any window [0] can
        history.popleft()
    return windowed(snap, ref)


def chrome_trace(stages: list[StageMetrics]) -> dict[str, Any]:
    """The recorded task spans of ``stages`` as a Chrome/Perfetto trace (``chrome://tracing``, ui.perfetto.dev):
    one row per worker (process:thread), one complete event ("ph": "X") per task, named after its step."""
    events: list[dict[str, Any]] = []
    tids: dict[str, int] = {}
    for m in stages:
        for start, end, worker in list(m.trace or ()):
            tid = tids.setdefault(f"{m.name} {worker}", len(tids) + 1)
            span = {"ts": start * 1e6, "dur": (end - start) * 1e6, "pid": 1, "tid": tid}
            events.append({"name": m.name, "cat": m.runner, "ph": "X", **span})
    events += [{"name": "thread_name", "ph": "M", "pid": 1, "tid": t, "args": {"name": n}} for n, t in tids.items()]
    return {"traceEvents": events, "displayTimeUnit": "ms"}
