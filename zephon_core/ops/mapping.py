"""``map_transform`` (1→1, or 1→0 to filter) and ``flat_map`` (1→n): stateless, fully parallel."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from zephon_core.errors import ConfigError
from zephon_core.ops.contract import (
    Accumulator,
    Emitted,
    Operator,
    Payload,
    Records,
    Traits,
    Work,
    WorkerFn,
    apply_each,
    callable_name,
)


class _PassThrough(Accumulator):
    """Hands each incoming run of records to the workers as one task (work on groups, not records)."""

    def push(self, records: Records) -> list[Emitted]:
        if not records.payloads:
            return [records] if records.dropped else []
        return [Work(records.payloads, records.keys, records.lineage, records.dropped)]


@dataclass(frozen=True, slots=True)
class _MapWorker:
    fn: Callable[[Payload], Payload | None]

    def __call__(self, payloads: list[Payload]) -> list[Payload | None]:
        return apply_each(self.fn, payloads)


@dataclass(frozen=True, slots=True)
class _FlatMapWorker:
    fn: Callable[[Payload], Iterable[Payload]]

    def __call__(self, payloads: list[Payload]) -> list[list[Payload]]:
        fn = self.fn
        return apply_each(lambda p: list(fn(p)), payloads)


def function_label(fn: Any, default: str) -> str:
    """An operator's default name: its function's name (``clean_html``), or ``default`` for a lambda."""
    name = getattr(fn, "__name__", None) or type(fn).__name__
    return name if isinstance(name, str) and name.isidentifier() else default


class _FunctionOperator(Operator):
    """A stateless operator applying one user function per record on the workers."""

    worker_type: type

    def __init__(self, fn: Callable[[Payload], Any], **kw: Any) -> None:
        if not callable(fn):
            raise ConfigError(f"{self.kind} needs a callable, got {fn!r}")
        if kw.get("name") is None:
            kw["name"] = function_label(fn, self.kind)
        super().__init__(**kw)
        self.fn = fn

    def config(self) -> dict[str, Any]:
        return {"fn": callable_name(self.fn)}

    def new_accumulator(self, lane: int) -> Accumulator:
        return _PassThrough()

    def worker(self) -> WorkerFn:
        return self.worker_type(self.fn)


class MapTransform(_FunctionOperator):
    """Apply ``fn(payload) -> dict | None`` to every record; ``None`` drops the record."""

    kind = "map_transform"
    traits = Traits(fanout="one")
    worker_type = _MapWorker


class FlatMap(_FunctionOperator):
    """Apply ``fn(payload) -> iterable of dicts``: one record becomes zero or more (lineage kept)."""

    kind = "flat_map"
    traits = Traits(fanout="many")
    worker_type = _FlatMapWorker
