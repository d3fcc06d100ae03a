"""``stateful_transform``: the functional way to write an n-to-m operator.

``push(state, payload)`` runs serially per lane and returns work items; ``transform(item)`` runs on
the workers. Lineage is tracked for the author: every item emitted while pushing a record is
attributed to that record and to all records pushed since the previous emission (they are what
the state held). Records still pending when a flush emits nothing are recorded as dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from zephon_core.errors import ConfigError
from zephon_core.hashing import mix64
from zephon_core.ops.contract import (
    Accumulator,
    Emitted,
    Lineage,
    Operator,
    Records,
    Traits,
    Work,
    WorkerFn,
    apply_each,
    callable_name,
)

_FLUSH_SALT = 1 << 40


class _FunctionalAccumulator(Accumulator):
    def __init__(self, op: StatefulTransform) -> None:
        self._op = op
        self._state = op.init_state()
        self._pending: list[int] = []  # sample ids pushed since the last emission
        self._last_key = 0

    def _emit(self, items: list[Any], key: int, out: Records | Work) -> None:
        lin: Lineage = tuple(self._pending)
        self._pending = []
        for j, item in enumerate(items):
            if isinstance(out, Work):
                out.task.append(item)
            else:
                out.payloads.append(item)
            out.keys.append(mix64(key, j))
            out.lineage.append(lin)

    def _container(self) -> Records | Work:
        return Work([], [], []) if self._op.transform is not None else Records.empty()

    def push(self, records: Records) -> list[Emitted]:
        out = self._container()
        out.dropped.extend(records.dropped)
        push = self._op.push_fn
        state = self._state
        for payload, key, lin in zip(records.payloads, records.keys, records.lineage):
            self._pending.extend(lin)
            self._last_key = key
            items = push(state, payload)
            if items:
                self._emit(list(items), key, out)
        return [out] if (out.keys or out.dropped) else []

    def flush(self) -> list[Emitted]:
        out = self._container()
        items = list(self._op.flush_fn(self._state)) if self._op.flush_fn else []
        if items:
            self._emit(items, self._last_key ^ _FLUSH_SALT, out)
        elif self._pending:
            out.dropped.append(tuple(self._pending))
            self._pending = []
        return [out] if (out.keys or out.dropped) else []

    def state(self) -> Any:
        return self._state


@dataclass(frozen=True, slots=True)
class _TransformWorker:
    fn: Callable[[Any], Any]

    def __call__(self, items: list[Any]) -> list[Any]:
        return apply_each(self.fn, items)


class StatefulTransform(Operator):
    """A custom n-to-m operator from four functions (see the module docstring)."""

    kind = "stateful_transform"

    def __init__(
        self,
        name: str,
        *,
        init_state: Callable[[], Any],
        push: Callable[[Any, dict[str, Any]], list[Any] | None],
        flush: Callable[[Any], list[Any] | None] | None = None,
        transform: Callable[[Any], dict[str, Any] | None] | None = None,
        parallelism: int = 1,
        runner: str | None = None,
    ) -> None:
        for label, fn in (("init_state", init_state), ("push", push)):
            if not callable(fn):
                raise ConfigError(f"stateful_transform {name!r}: {label} must be callable, got {fn!r}")
        super().__init__(parallelism=parallelism, runner=runner, name=name)
        self.init_state = init_state
        self.push_fn = push
        self.flush_fn = flush
        self.transform = transform
        self.traits = Traits(fanout="one", has_worker=transform is not None, stateful=True)

    def config(self) -> dict[str, Any]:
        fns = {"init_state": self.init_state, "push": self.push_fn, "flush": self.flush_fn, "transform": self.transform}
        return {k: (callable_name(v) if v is not None else None) for k, v in fns.items()}

    def new_accumulator(self, lane: int) -> Accumulator:
        return _FunctionalAccumulator(self)

    def worker(self) -> WorkerFn | None:
        return _TransformWorker(self.transform) if self.transform is not None else None
