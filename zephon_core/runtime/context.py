"""What a running pipeline's threads share: the first failure and the stop flag.

Every blocking call in a pipeline thread goes through :class:`Context` and wakes up every :data:`POLL`
seconds to look at the stop flag, so ``close()`` or a failure ends every thread promptly.
"""

from __future__ import annotations

import functools
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

POLL = 0.05
T = TypeVar("T")


class Stopped(Exception):
    """Raised inside pipeline threads when the pipeline is shutting down."""


class Context:
    """Shared between a pipeline's threads: the first failure, and the stop flag."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self._lock = threading.Lock()

    def fail(self, exc: BaseException) -> None:
        """Record the first failure (it reaches the training loop) and stop every thread."""
        with self._lock:
            if self.error is None and not self.stop.is_set():
                self.error = exc
        self.stop.set()

    def put(self, q: queue.Queue[T], item: T) -> None:
        self._poll(functools.partial(q.put, item, timeout=POLL), queue.Full)

    def get(self, q: queue.Queue[T], idle: Callable[[], None] | None = None) -> T:
        """The next item of ``q``; ``idle()`` runs at every poll while waiting (a watchdog check)."""
        return self._poll(functools.partial(q.get, timeout=POLL), queue.Empty, idle)

    def result(self, fut: Future[Any], idle: Callable[[], None] | None = None) -> Any:
        """The future's result; ``idle()`` runs at every poll while waiting (a watchdog check)."""
        return self._poll(functools.partial(fut.result, timeout=POLL), TimeoutError, idle)

    def _poll(self, wait: Callable[[], T], timed_out: type[Exception], idle: Callable[[], None] | None = None) -> T:
        """``wait()`` again until it returns, every :data:`POLL` seconds, until the stop flag is set."""
        while not self.stop.is_set():
            try:
                return wait()
            except timed_out:
                if idle is not None:
                    idle()
        raise Stopped
