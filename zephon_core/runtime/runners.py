"""Runners: where an operator's worker function executes.

A runner only executes; it never orders. Each stage keeps its futures in submission order and
releases results from the head, so a runner may finish tasks in any order without changing output.
That is why switching runners is a pure performance choice.

Beyond :class:`Runner` and :class:`Executor`, optional capabilities are small protocols the kernel
checks with ``isinstance``: :class:`CrossesProcesses`, :class:`Resizable` and :class:`ReportsMetrics`.
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
    """An executor capability: its pool can change size while it runs.

    With ``options(autotune=True)`` the autotuner grows the pool of the stage that limits throughput
    and shrinks idle ones, within the CPU budget; without it a pool keeps the parallelism it started
    with. Resizing must never change any output (stages reorder results anyway).
    """

    def resize(self, parallelism: int) -> None:
        """Run ``parallelism`` workers from now on (a shrinking pool may finish current tasks first)."""


@runtime_checkable
class ReportsMetrics(Protocol):
    """An executor capability: it reports its pool's own figures.

    ``Pipeline.metrics()`` shows what :meth:`metrics` returns under the stage's ``"executor"`` key
    (e.g. the Ray runner's live actors, retries and replacements). It is called from whichever thread
    reads the metrics, so it must be quick and thread-safe.
    """

    def metrics(self) -> dict[str, Any]:
        """A JSON-compatible snapshot of the pool (cumulative counters and current sizes)."""


@runtime_checkable
class CrossesProcesses(Protocol):
    """A runner capability: whether its workers run outside the training process.

    There every stage boundary copies the records to another process and back, so the pipeline fuses
    a run of stateless steps into one task (:mod:`zephon_core.runtime.fusion`; it and its result must
    pickle), the default collation stays on threads in the training process
    (:meth:`~zephon_core.runtime.batch.BatchSpec.default_runner`), and ``diagnose()`` does not suggest
    the processes runner for a busy step. A runner that does not declare it is taken to run in-process.
    """

    @property
    def crosses_processes(self) -> bool:
        """True when workers run in other processes (or on other machines)."""


def crosses_processes(runner: object) -> bool:
    """Whether ``runner`` (a :class:`Runner`) declares :class:`CrossesProcesses` and says True."""
    return isinstance(runner, CrossesProcesses) and runner.crosses_processes is True


def runner_crosses_processes(name: str, plugins: ZephonPluginManager | None = None) -> bool:
    """Whether the runner registered as ``name`` in ``plugins`` (default: the default plugin manager)
    crosses processes. It is made as the pipeline would (a runner starts nothing until ``start``); one
    that cannot be made is taken not to cross here: the pipeline reports it when it starts the stage.
    """
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
    """A pool of daemon threads.

    Not :class:`concurrent.futures.ThreadPoolExecutor`: its threads are joined at interpreter exit,
    so one hung task (a user function that never returns) would keep the process alive after
    Ctrl-C. Daemon threads let ``close()`` abandon a hung task and the process exit.
    """

    def __init__(self, fn: WorkerFn, parallelism: int, label: str) -> None:
        self._fn = fn
        self._label = label
        self._tasks: queue.SimpleQueue[tuple[Future[Any], Any] | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self.resize(parallelism)

    def resize(self, parallelism: int) -> None:
        """Run ``parallelism`` workers from now on (the autotuner's knob; never changes any output);
        surplus workers stop after their current task."""
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
