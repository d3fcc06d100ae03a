"""Runners: where an operator's worker function executes.

A runner only executes; it never orders. Each stage keeps its futures in submission order and
releases results from the head, so a runner may finish tasks in any order without changing output.
That is why switching runners is a pure performance choice.

Besides the two protocols every runner and executor implements, a runner or executor may declare
optional capabilities, each a small protocol the kernel checks with ``isinstance``:
:class:`CrossesProcesses` (a runner whose workers live in other processes: consecutive stateless
steps are fused there), :class:`Resizable` (an executor whose pool the autotuner may grow or
shrink) and :class:`ReportsMetrics` (an executor whose figures ``Pipeline.metrics()`` shows).
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
        ...

    def close(self) -> None:
        """Stop every worker; must not leave threads or processes behind."""
        ...


class Runner(Protocol):
    """Creates executors. Registered by name through the ``zephon_register_runners`` hook.

    A runner whose workers live in other processes also declares :class:`CrossesProcesses`; the
    executors it starts may declare :class:`Resizable`.
    """

    name: str

    def start(self, fn: WorkerFn, parallelism: int, label: str) -> Executor: ...


@runtime_checkable
class Resizable(Protocol):
    """An executor capability: its pool can change size while it runs.

    When the kernel uses it: with ``options(autotune=True)`` the autotuner grows the pool of the
    stage that limits throughput and shrinks idle ones, within the CPU budget; an executor without
    it keeps the parallelism it was started with. Resizing must never change any output (stages
    reorder results anyway).
    """

    def resize(self, parallelism: int) -> None:
        """Run ``parallelism`` workers from now on (a shrinking pool may finish current tasks first)."""
        ...


@runtime_checkable
class ReportsMetrics(Protocol):
    """An executor capability: it reports its pool's own figures.

    When the kernel uses it: ``Pipeline.metrics()`` shows what :meth:`metrics` returns under the
    stage's ``"executor"`` key (e.g. the Ray runner's live actors, retries and replacements). It is
    called from whichever thread reads the metrics, so it must be quick and thread-safe.
    """

    def metrics(self) -> dict[str, Any]:
        """A JSON-compatible snapshot of the pool (cumulative counters and current sizes)."""
        ...


@runtime_checkable
class CrossesProcesses(Protocol):
    """A runner capability: whether its workers run outside the training process.

    When the kernel uses it: on such a runner every stage boundary costs copying the records to
    another process and back, so the pipeline fuses a run of stateless steps into one task
    (:mod:`zephon_core.runtime.fusion`; the fused task and its result must pickle), the default
    collation stays on threads in the training process
    (:meth:`~zephon_core.runtime.batch.BatchSpec.default_runner`), and ``diagnose()`` does not
    suggest moving a busy step to the processes runner. The processes and Ray runners declare
    ``crosses_processes = True``; a runner that does not declare it is taken to run in-process.
    """

    @property
    def crosses_processes(self) -> bool:
        """True when workers run in other processes (or on other machines)."""
        ...


def crosses_processes(runner: object) -> bool:
    """Whether ``runner`` (a :class:`Runner`) declares :class:`CrossesProcesses` and says True."""
    return isinstance(runner, CrossesProcesses) and runner.crosses_processes is True


def runner_crosses_processes(name: str, plugins: ZephonPluginManager | None = None) -> bool:
    """Whether the runner registered as ``name`` crosses processes (:class:`CrossesProcesses`).

    Looked up in ``plugins`` (default: :func:`~zephon_core.plugins.default_plugin_manager`). The
    runner is instantiated as the pipeline would (runners are cheap to make: they start nothing
    until ``start``); an unknown name or a runner that cannot be made is taken not to cross
    processes here, and the pipeline reports that problem when it starts the stage.
    """
    from zephon_core.plugins import default_plugin_manager

    pm = plugins if plugins is not None else default_plugin_manager()
    try:
        runner = pm.registry.get("runner", name).load()()
    except Exception:
        return False
    return crosses_processes(runner)


class _InlineExecutor:
    def __init__(self, fn: WorkerFn) -> None:
        self._fn = fn

    def submit(self, task: Any) -> Future[Any]:
        fut: Future[Any] = Future()
        try:
            fut.set_result(self._fn(task))
        except BaseException as exc:  # delivered to the stage like any worker failure
            fut.set_exception(exc)
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

    @property
    def parallelism(self) -> int:
        return len(self._threads)

    def resize(self, parallelism: int) -> None:
        """Run ``parallelism`` workers from now on (the autotuner's knob; never changes any output).

        Shrinking asks surplus workers to stop after their current task (one ``None`` each).
        """
        while len(self._threads) < parallelism:
            t = threading.Thread(target=self._serve, name=f"zephon-{self._label}-{len(self._threads)}", daemon=True)
            self._threads.append(t)
            t.start()
        while len(self._threads) > max(1, parallelism):
            self._threads.pop()
            self._tasks.put(None)

    def _serve(self) -> None:
        while True:
            item = self._tasks.get()
            if item is None:
                return
            fut, task = item
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                fut.set_result(self._fn(task))
            except BaseException as exc:  # delivered to the stage like any worker failure
                fut.set_exception(exc)

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
