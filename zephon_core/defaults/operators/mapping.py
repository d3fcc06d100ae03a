"""``map_transform`` (1→1, or 1→0 to filter) and ``flat_map`` (1→n): stateless, fully parallel.

Per-sample randomness
---------------------
A user function that declares a parameter named ``rng`` (``def augment(payload, rng)``) is called
with a :class:`numpy.random.Generator` made for that record alone, seeded from (the operator's
``seed``, the operator's name, the record key). Record keys come from the work source's chunk
numbering, never from the lane, rank, worker or time, so the draws are the same on every runner,
parallelism, world size and after resume, while the global ``random``/``np.random`` state stays
forbidden (rule 3). :func:`sample_rng` is the one derivation; ``stateful_transform`` uses it too.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from zephon_core.errors import ConfigError
from zephon_core.hashing import mix64, stable_hash64
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

RNG_PARAMETER = "rng"
"""The parameter name by which a user function asks for its per-sample generator."""


def takes_rng(fn: Any, what: str) -> bool:
    """Whether ``fn`` declares a parameter named ``rng`` (it is then passed by keyword).

    Inspected once, when the operator is built, so a worker pays nothing per record to find out.
    A callable whose signature cannot be read (some builtins) is taken not to want one.
    """
    try:
        param = inspect.signature(fn).parameters.get(RNG_PARAMETER)
    except (TypeError, ValueError):
        return False
    if param is None or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
        return False
    if param.kind is param.POSITIONAL_ONLY:
        raise ConfigError(f"{what}: the rng parameter is passed by keyword; it cannot be positional-only")
    return True


def check_seed(seed: Any, what: str) -> int:
    """Validate an operator's ``seed=``: an int (bool is refused, it is almost always a mistake)."""
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ConfigError(f"{what}: seed must be an int, got {seed!r}")
    return seed


def rng_base(seed: int, name: str) -> int:
    """The per-operator half of the seed: (pipeline seed, operator name), never lane or rank."""
    return stable_hash64("zephon.sample_rng", seed, name)


def sample_rng(base: int, key: int) -> np.random.Generator:
    """The generator of one record: PCG64 seeded with ``mix64(base, key)``.

    Equal to ``np.random.default_rng(mix64(base, key))``; a fresh generator per record, so the
    values a record draws cannot depend on which records shared its task or worker.
    """
    return np.random.Generator(np.random.PCG64(mix64(base, key)))


class PassThrough(Accumulator):
    """Hands each incoming run of records to the workers as one task (work on groups, not records).

    Stateless, and says so (:class:`~zephon_core.ops.contract.PassesThrough`): on a runner that
    crosses processes the kernel may run this step's worker in the previous step's task
    (:mod:`zephon_core.runtime.fusion`). A subclass that changes :meth:`push` must set
    ``passes_through = False``.

    With ``with_keys`` the task is ``(payloads, keys)``: a function that takes ``rng`` needs each
    record's key on the worker to seed its generator.
    """

    passes_through = True

    def __init__(self, with_keys: bool = False) -> None:
        self.with_keys = with_keys

    def push(self, records: Records) -> list[Emitted]:
        if not records.payloads:
            return [records] if records.dropped else []
        task = (records.payloads, records.keys) if self.with_keys else records.payloads
        return [Work(task, records.keys, records.lineage, records.dropped)]


def call_with_rng(fn: Callable[..., Any], base: int, task: tuple[list[Any], list[int]]) -> list[Any]:
    """``fn(item, rng=...)`` per item of a ``(items, keys)`` task; a failure names the item (apply_each)."""
    items, keys = task
    return apply_each(lambda ik: fn(ik[0], rng=sample_rng(base, ik[1])), list(zip(items, keys)))


@dataclass(frozen=True, slots=True)
class _MapWorker:
    fn: Callable[..., Payload | None]
    rng_base: int | None = None  # set when fn takes rng: the task is then (payloads, keys)

    def __call__(self, task: Any) -> list[Payload | None]:
        if self.rng_base is None:
            return apply_each(self.fn, task)
        return call_with_rng(self.fn, self.rng_base, task)


@dataclass(frozen=True, slots=True)
class _FlatMapWorker:
    fn: Callable[..., Iterable[Payload]]
    rng_base: int | None = None

    def __call__(self, task: Any) -> list[list[Payload]]:
        fn = self.fn
        if self.rng_base is None:
            return apply_each(lambda p: list(fn(p)), task)
        return call_with_rng(lambda p, rng: list(fn(p, rng=rng)), self.rng_base, task)  # lazy errors named too


def function_label(fn: Any, default: str) -> str:
    """An operator's default name: its function's name (``clean_html``), or ``default`` for a lambda."""
    name = getattr(fn, "__name__", None) or type(fn).__name__
    return name if isinstance(name, str) and name.isidentifier() else default


class _FunctionOperator(Operator):
    """A stateless operator applying one user function per record on the workers.

    ``seed`` only matters when ``fn`` takes ``rng`` (module docstring); it is then part of the
    configuration, and otherwise left out so existing fingerprints do not change.
    """

    worker_type: type[_MapWorker] | type[_FlatMapWorker]

    def __init__(self, fn: Callable[..., Any], *, seed: int = 0, **kw: Any) -> None:
        if not callable(fn):
            raise ConfigError(f"{self.kind} needs a callable, got {fn!r}")
        if kw.get("name") is None:
            kw["name"] = function_label(fn, self.kind)
        super().__init__(**kw)
        self.fn = fn
        self.seed = check_seed(seed, f"{self.kind} {self.name!r}")
        self.takes_rng = takes_rng(fn, f"{self.kind} {self.name!r}")
        if seed != 0 and not self.takes_rng:
            raise ConfigError(
                f"{self.kind} {self.name!r}: seed={seed} is given but {callable_name(fn)} declares no "
                f"parameter named {RNG_PARAMETER!r}, so nothing would use it"
            )

    def config(self) -> dict[str, Any]:
        if self.takes_rng:
            return {"fn": callable_name(self.fn), "rng": True, "seed": self.seed}
        return {"fn": callable_name(self.fn)}

    def new_accumulator(self, lane: int) -> Accumulator:
        return PassThrough(with_keys=self.takes_rng)

    def worker(self) -> WorkerFn:
        # the name is final only once the pipeline has numbered repeated steps, so hash it here
        return self.worker_type(self.fn, rng_base(self.seed, self.name) if self.takes_rng else None)


class MapTransform(_FunctionOperator):
    """Apply ``fn(payload) -> dict | None`` to every record; ``None`` drops the record.

    ``fn(payload, rng)`` gets a per-record generator (module docstring); ``seed=`` varies it.
    """

    kind = "map_transform"
    traits = Traits(fanout="one")
    worker_type = _MapWorker


class FlatMap(_FunctionOperator):
    """Apply ``fn(payload) -> iterable of dicts``: one record becomes zero or more (lineage kept).

    Like :class:`MapTransform`, ``fn(payload, rng)`` gets a per-record generator.
    """

    kind = "flat_map"
    traits = Traits(fanout="many")
    worker_type = _FlatMapWorker
