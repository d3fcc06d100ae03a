"""How a running pipeline ends when nobody closes it: dropped, abandoned mid-loop, or at interpreter exit.

A daemon thread left inside C++ code (a tokenizer, pyarrow) when the interpreter finalises aborts the
process (``docs/failure-modes.md``), so the engine's threads reach the pipeline only through :func:`weakly`
(a dropped pipeline is collected, and its ``__del__`` closes it), :class:`PipelineIterator` keeps it alive
as long as a loop needs it, and an ``atexit`` handler closes every pipeline still in :data:`RUNNING`.
"""

from __future__ import annotations

import atexit
import contextlib
import weakref
from collections.abc import Callable, Iterator
from typing import Any, Protocol, TypeVar

from zephon_core.runtime.types import SampleBatch

T = TypeVar("T")


class Closable(Protocol):
    """Anything :data:`RUNNING` can close at exit."""

    def close(self) -> None: ...


RUNNING: weakref.WeakSet[Any] = weakref.WeakSet()
"""Started pipelines not yet closed (weak references: they do not keep a pipeline alive)."""


def started(pipeline: Closable) -> None:
    """Record a pipeline that started running (closed at interpreter exit if still running)."""
    RUNNING.add(pipeline)


def stopped(pipeline: Closable) -> None:
    """Forget a pipeline that was closed."""
    RUNNING.discard(pipeline)


@atexit.register
def close_running() -> None:
    """Close every pipeline still running (called at interpreter exit, before threads are finalised)."""
    for pipeline in list(RUNNING):
        with contextlib.suppress(Exception):  # at exit there is no one left to tell; the next must still close
            pipeline.close()


def weakly(method: Callable[..., T], dead: Callable[..., T]) -> Callable[..., T]:
    """``method`` (a bound method) called through a weak reference to its object; ``dead`` once it is gone
    (a strong reference in the engine's threads would keep a dropped pipeline alive for ever)."""
    ref = weakref.WeakMethod(method)

    def call(*args: Any, **kwargs: Any) -> T:
        bound = ref()
        return dead(*args, **kwargs) if bound is None else bound(*args, **kwargs)

    return call


class PipelineIterator:
    """What ``iter(pipeline)`` returns: the pipeline's batches, and a reference that keeps it running
    (other attributes are the engine's, the underlying iterator)."""

    __slots__ = ("_it", "_owner")

    def __init__(self, owner: object, it: Iterator[SampleBatch]) -> None:
        self._owner = owner
        self._it = it

    def __iter__(self) -> PipelineIterator:
        return self

    def __next__(self) -> SampleBatch:
        return next(self._it)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._it, name)
