"""Runners: where an operator's worker function executes.

A runner only executes; it never orders. Each stage keeps its futures in submission order and
releases results from the head, so a runner may finish tasks in any order without changing output.
That is why switching runners is a pure performance choice.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
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
    def __init__(self, fn: WorkerFn, parallelism: int, label: str) -> None:
        self._fn = fn
        self._pool = ThreadPoolExecutor(max_workers=parallelism, thread_name_prefix=f"zephon-{label}")

    def submit(self, task: Any) -> Future[Any]:
        return self._pool.submit(self._fn, task)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


class ThreadRunner:
    """A thread pool per operator: no serialisation; good for I/O and GIL-releasing native code."""

    name = "threads"

    def start(self, fn: WorkerFn, parallelism: int, label: str) -> Executor:
        return _ThreadExecutor(fn, parallelism, label)
