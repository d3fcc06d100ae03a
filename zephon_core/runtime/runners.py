"""Runners: where an operator's worker function executes.

A runner only executes; it never orders (each stage releases results in submission order), so it may
finish tasks in any order and switching runners is a pure performance choice. Optional capabilities
are protocols checked with ``isinstance``: :class:`CrossesProcesses`, :class:`Resizable`, :class:`ReportsMetrics`.
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from zephon_core.ops.contract import WorkerFn

if TYPE_CHECKING:
    from zephon_core.plugins import ZephonPluginManager


class Executor(Protocol):
    """A started pool of workers for one operator."""

    def submit(self, task: Any) -> Future[Any]:
        """Run the worker function on ``task``; the future holds its result or exception."""

    def close(self) -> None:
        """Stop every worker; must not leave threads or processes behind."""


class Runner(Protocol):
    """Creates executors. Registered by name through the ``zephon_register_runners`` hook."""

    name: str

    def start(self, fn: WorkerFn, parallelism: int, label: str) -> Executor: ...


@runtime_checkable
class Resizable(Protocol):
    """An executor capability: its pool can change size while it runs (``options(autotune=True)`` grows
    the stage that limits throughput and shrinks idle ones, within the CPU budget); no output may change."""

    def resize(self, parallelism: int) -> None:
        """Run ``parallelism`` workers from now on (a shrinking pool may finish current tasks first)."""


@runtime_checkable
class ReportsMetrics(Protocol):
    """An executor capability: it reports its pool's own figures, under the stage's ``"executor"`` key of
    ``Pipeline.metrics()`` (e.g. the Ray runner's live actors and retries); called from whichever thread
    reads the metrics, so it must be quick and thread-safe."""

    def metrics(self) -> dict[str, Any]:
        """A JSON-compatible snapshot of the pool (cumulative counters and current sizes)."""


@runtime_checkable
class CrossesProcesses(Protocol):
    """A runner capability: whether its workers run outside the training process.

    There every stage boundary copies the records to another process and back, so the pipeline fuses
    a run of stateless steps into one task (:mod:`zephon_core.runtime.fusion`; it and its result must
    pickle), keeps the default collation on threads (:meth:`~zephon_core.runtime.batch.BatchSpec.default_runner`)
    and ``diagnose()`` suggests no processes runner. A runner that does not declare it runs in-process.
    """

    @property
    def crosses_processes(self) -> bool:
        """True when workers run in other processes (or on other machines)."""


def crosses_processes(runner: object) -> bool:
    """Whether ``runner`` (a :class:`Runner`) declares :class:`CrossesProcesses` and says True."""
    return isinstance(runner, CrossesProcesses) and runner.crosses_processes is True


def runner_crosses_processes(name: str, plugins: ZephonPluginManager | None = None) -> bool:
    """Whether the runner registered as ``name`` in ``plugins`` (default: the default plugin manager)
    crosses processes; one that cannot be made is taken not to (the pipeline reports it at start)."""
    from zephon_core.plugins import default_plugin_manager

    pm = plugins if plugins is not None else default_plugin_manager()
    try:
        runner = pm.registry.get("runner", name).load()()
    except Exception:
        return False
    return crosses_processes(runner)


def _run_into(fut: Future[Any], fn: WorkerFn, task: Any) -> None:
    try:
        fut.set_result(fn(task))
    except BaseException as exc:  # delivered to the stage like any worker failure
        fut.set_exception(exc)


class _InlineExecutor:
    def __init__(self, fn: WorkerFn) -> None:
        self._fn = fn

    def submit(self, task: Any) -> Future[Any]:
        fut: Future[Any] = Future()
        _run_into(fut, self._fn, task)
        return fut

    def close(self) -> None:
        pass


class InlineRunner:
    """Runs the worker in the stage's own thread, one task at a time: the reference runner."""

    name = "inline"

    def start(self, fn: WorkerFn, parallelism: int, label: str) -> Executor:
        return _InlineExecutor(fn)


class _ThreadExecutor:
    """A pool of daemon threads, so ``close()`` can abandon a hung task and the process still exit
    (:class:`concurrent.futures.ThreadPoolExecutor` joins its threads at interpreter exit)."""

    def __init__(self, fn: WorkerFn, parallelism: int, label: str) -> None:
        self._fn, self._label = fn, label
        self._tasks: queue.SimpleQueue[tuple[Future[Any], Any] | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self.resize(parallelism)

    def resize(self, parallelism: int) -> None:
        """Run ``parallelism`` workers from now on; surplus workers stop after their current task."""
        while len(self._threads) < parallelism:
            t = threading.Thread(target=self._serve, name=f"zephon-{self._label}-{len(self._threads)}", daemon=True)
            self._threads.append(t)
            t.start()
        while len(self._threads) > max(1, parallelism):
            self._threads.pop()
            self._tasks.put(None)

    def _serve(self) -> None:
        while (item := self._tasks.get()) is not None:
            fut, task = item
            if fut.set_running_or_notify_cancel():
                _run_into(fut, self._fn, task)

    def submit(self, task: Any) -> Future[Any]:
        fut: Future[Any] = Future()
        self._tasks.put((fut, task))
        return fut

    def close(self) -> None:
        for _ in self._threads:
            self._tasks.put(None)
        for t in self._threads:
            t.join(timeout=0.5)  # a hung task's thread is abandoned: it is a daemon


class ThreadRunner:
    """A thread pool per operator: no serialisation; good for I/O and GIL-releasing native code."""

    name = "threads"

    def start(self, fn: WorkerFn, parallelism: int, label: str) -> Executor:
        return _ThreadExecutor(fn, parallelism, label)
