"""Runners: where an operator's worker function executes.

A runner only executes; it never orders. Each stage keeps its futures in submission order and
releases results from the head, so a runner may finish tasks in any order without changing output.
That is why switching runners is a pure performance choice.
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future
from typing import Any, Protocol

from zephon_core.ops.contract import WorkerFn


class Executor(Protocol):
    """A started pool of workers for one operator."""

    def submit(self, task: Any) -> Future[Any]:
        """Run the worker function on ``task``; the future holds its result or exception."""
        ...

    def close(self) -> None:
        """Stop every worker; must not leave threads or processes behind."""
        ...


class Runner(Protocol):
    """Creates executors. Registered by name through the ``zephon_register_runners`` hook."""

    name: str

    def start(self, fn: WorkerFn, parallelism: int, label: str) -> Executor: ...


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
