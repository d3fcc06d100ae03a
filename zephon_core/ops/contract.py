"""The operator contract: a serial per-lane accumulator plus a pure, parallel worker function.

The **accumulator** sees every record of one lane, in order, on one thread, and makes every stateful
decision; the **worker** turns a :class:`Work` item into payloads as a pure, picklable function, run
anywhere in any order, so parallelism cannot change the output. A :class:`Work` item carries each output
slot's key and lineage; a slot whose output is ``None`` (fanout ``"one"``) or ``[]`` (``"many"``) is a
dropped record, its lineage kept as a tombstone."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, TypeVar, cast, runtime_checkable

from zephon_core.errors import ConfigError

if TYPE_CHECKING:
    from zephon_core.work.contract import SourceInfo
    from zephon_core.work.dataset import Dataset

Payload = dict[str, Any]
Lineage = tuple[int, ...]


@dataclass(slots=True)
class Records:
    """An ordered run of records from one lane, stored column-wise to keep per-record cost low.

    Attributes:
        payloads: the records' data.
        keys: each record's identity, unique within its lane (64-bit).
        lineage: each record's source sample ids (see :func:`zephon_core.defaults.sources.static_mixture.sample_id`).
        dropped: lineage of records dropped while producing this run (tombstones)."""

    payloads: list[Payload]
    keys: list[int]
    lineage: list[Lineage]
    dropped: list[Lineage] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.payloads)

    @staticmethod
    def empty() -> Records:
        return Records([], [], [])


@dataclass(slots=True)
class Work:
    """What an accumulator asks a worker to do.

    Attributes:
        task: the worker's input (pickled for process workers; keep it small and plain).
        keys: identity of each output slot.
        lineage: source sample ids of each output slot.
        dropped: lineage of records the accumulator itself dropped.
        meta: bookkeeping carried past the worker untouched (e.g. a microbatch's number and resume point)."""

    task: Any
    keys: list[int]
    lineage: list[Lineage]
    dropped: list[Lineage] = field(default_factory=list)
    meta: Any = None


Emitted = Work | Records


class Accumulator(ABC):
    """Per-lane serial state of an operator, made anew for each lane and after every flush."""

    @abstractmethod
    def push(self, records: Records) -> list[Emitted]:
        """Consume records (in lane order) and return zero or more work items or finished records."""

    def flush(self) -> list[Emitted]:
        """Emit everything held for this lane; the instance is discarded afterwards."""
        return []

    def state(self) -> Any:
        """The accumulator's state as plain data, for the JSON-round-trip conformance check."""
        return None


@runtime_checkable
class ReportsState(Protocol):
    """An accumulator capability (every :class:`Accumulator` has it): ``options(validate=...)`` checks,
    between pushes of two interleaved lanes, that :meth:`state` is JSON data."""

    def state(self) -> Any:
        """The accumulator's state as plain data (``None``: nothing to show)."""


@runtime_checkable
class PassesThrough(Protocol):
    """An accumulator capability: ``passes_through = True`` promises that ``push(records)`` returns exactly
    ``[Work(task, records.keys, records.lineage, records.dropped)]``, ``task`` being ``records.payloads``
    (``(payloads, keys)`` when :attr:`with_keys`), or ``[records]`` for a run with no payloads, and that
    ``flush()`` returns nothing. On a runner that crosses processes such a step of fanout one is fused
    into the previous step's task and its accumulator never called; a subclass of
    :class:`~zephon_core.defaults.operators.mapping.PassThrough` that changes ``push`` must opt out."""

    @property
    def passes_through(self) -> bool:
        """True when the promise above holds (False opts a subclass out)."""

    @property
    def with_keys(self) -> bool:
        """Whether the task is ``(payloads, keys)`` rather than ``payloads``."""


def passes_through(acc: object) -> bool:
    """Whether accumulator ``acc`` declares the :class:`PassesThrough` capability (and says True)."""
    return isinstance(acc, PassesThrough) and acc.passes_through is True


@dataclass(frozen=True, slots=True)
class Traits:
    """What an operator claims about itself; the runtime and conformance suite rely on it.

    Attributes:
        fanout: ``"one"``: the worker returns one payload or None per slot; ``"many"``: a list per slot.
        has_worker: False when the accumulator emits finished :class:`Records` only (e.g. shuffle).
        stateful: holds records across pushes (so flushes and replay matter).
        resets_on_flush: returns to a fresh state at each flush sentinel (all but ``batch``).
        reads_pointers: turns the source's pointers into records (the fetch stage); a fused group may start with it."""

    fanout: Literal["one", "many"] = "one"
    has_worker: bool = True
    stateful: bool = False
    resets_on_flush: bool = True
    reads_pointers: bool = False


WorkerFn = Callable[[Any], Sequence[Any]]


class Operator(ABC):
    """Base class of every operator, built-in or plugin. Subclasses define :attr:`kind` (the registered
    name), :meth:`config`, :meth:`new_accumulator` and, when ``traits.has_worker``, :meth:`worker`."""

    kind: ClassVar[str] = ""
    traits: Traits = Traits()  # a class default; an operator whose traits depend on its arguments sets its own

    def __init__(
        self,
        *,
        parallelism: int = 1,
        runner: str | None = None,
        name: str | None = None,
        timeout_s: float | None = None,
    ) -> None:
        if not isinstance(parallelism, int) or isinstance(parallelism, bool) or parallelism < 1:
            raise ConfigError(f"operator {name or self.kind!r}: parallelism must be an int >= 1, got {parallelism!r}")
        self.parallelism = parallelism
        self.runner = runner
        self.name = name or self.kind
        self.timeout_s = check_timeout(timeout_s, f"operator {self.name!r}")

    @abstractmethod
    def config(self) -> dict[str, Any]:
        """JSON-able configuration; part of the pipeline fingerprint (not parallelism or runner)."""

    @abstractmethod
    def new_accumulator(self, lane: int) -> Accumulator:
        """A fresh accumulator for ``lane``."""

    def worker(self) -> WorkerFn | None:
        """The pure function run on workers; must be picklable for the processes runner."""
        return None

    def setup(self, source: SourceInfo) -> None:  # noqa: B027 - optional hook
        """Called once before the pipeline starts with what operators may know of the work source."""

    def estimate_tokens(self, datasets: Sequence[Dataset]) -> dict[str, float] | None:
        """Tokens per sample of each dataset, for sources that mix by tokens; None if not a tokenizer.
        Asked once before the first chunk and frozen into checkpoints, so it must be a pure function of
        the datasets and the operator's configuration."""
        return None

    def training_view(self) -> Callable[[dict[str, Any]], dict[str, Any]] | None:
        """Optional conversion applied by ``SampleBatch.to_training()`` (e.g. labels from packed rows)."""
        return None

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "config": self.config()}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, parallelism={self.parallelism})"


@runtime_checkable
class AdoptsRecordedConfig(Protocol):
    """An operator capability: resume a checkpoint whose operator resolved a default differently.

    Given a recorded config implying the earlier behaviour, it adopts it *when the setting was left at its
    default* and returns the undo; ``load_state_dict`` asks when fingerprints differ, keeping what matches."""

    def adopt_recorded_config(self, config: Mapping[str, Any]) -> Callable[[], None] | None:
        """Adopt what ``config`` (a checkpoint's record of this operator) resolved; return the undo."""


@runtime_checkable
class LocatedFailure(Protocol):
    """A worker failure that says which slot of its work item failed (``index``, or None), so the stage
    names only that slot's samples; :class:`ItemFailure` and the failures runners carry back are ones."""

    index: int | None


@runtime_checkable
class FusedFailure(Protocol):
    """A failure inside a fused task, marked with the fused step that raised it so the error names that
    step; a runner carrying failures back copies ``fused_step``. Set it with :func:`mark_fused_failure`."""

    fused_step: int | None


def mark_fused_failure(exc: BaseException, step: int, index: int | None = None) -> None:
    """Mark ``exc`` (the user's own) with the fused ``step`` that raised it and, for an item failure, the
    slot; one whose type refuses new attributes is reported under the fused stage's name."""
    try:
        cast(FusedFailure, exc).fused_step = step
        if index is not None:
            cast(LocatedFailure, exc).index = index
    except AttributeError:
        pass


def fused_step_of(exc: BaseException) -> int | None:
    """The fused step ``exc`` was marked with (:func:`mark_fused_failure`), or None."""
    step = exc.fused_step if isinstance(exc, FusedFailure) else None
    return step if isinstance(step, int) and not isinstance(step, bool) else None


def failed_slot(exc: BaseException) -> int | None:
    """The slot of the work item a :class:`LocatedFailure` names, or None."""
    index = exc.index if isinstance(exc, LocatedFailure) else None
    return index if isinstance(index, int) and not isinstance(index, bool) else None


class ItemFailure(Exception):
    """Raised by a worker to say which slot of its work item failed, so the error can name the sample."""

    def __init__(self, index: int, message: str) -> None:
        super().__init__(index, message)
        self.index = index
        self.message = message

    def __str__(self) -> str:
        return self.message


def apply_each(fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
    """``[fn(x) for x in items]``, but a failure names the item's position (see :class:`ItemFailure`)."""
    out: list[Any] = []
    append = out.append  # bound once: this loop runs per record
    for i, item in enumerate(items):
        try:
            append(fn(item))
        except Exception as exc:
            raise ItemFailure(i, f"{type(exc).__name__}: {exc}") from exc
    return out


def check_timeout(value: Any, what: str) -> float | None:
    """Validate a ``timeout_s`` option: None (no limit) or a positive number of seconds."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ConfigError(f"{what}: timeout_s must be a positive number of seconds or None, got {value!r}")
    return float(value)


STABLE_NAMES: dict[str, str] = {}
"""Functions that moved: today's ``module:qualname`` -> the name fingerprints have always used, so
their checkpoints stay loadable (filled by :func:`stable_name`, read by :func:`callable_name`)."""

_F = TypeVar("_F", bound=Callable[..., Any])
_QUALIFIED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")


def stable_name(former: str) -> Callable[[_F], _F]:
    """Decorate a function that moved so fingerprints keep naming it ``former`` (``"module:qualname"``);
    keep the former module importable too (a forwarder).

    Raises:
        ConfigError: ``former`` is not ``module:qualname``, or another function already claims it."""
    if not isinstance(former, str) or not _QUALIFIED.fullmatch(former):
        raise ConfigError(f"stable_name({former!r}): the former name must be 'module:qualname'")

    def declare(fn: _F) -> _F:
        current = f"{fn.__module__}:{fn.__qualname__}"
        if STABLE_NAMES.get(current, former) != former:
            raise ConfigError(f"stable_name({former!r}) on {current}: it is already named {STABLE_NAMES[current]!r}")
        for now, name in STABLE_NAMES.items():
            if name == former and now != current:
                raise ConfigError(f"stable_name({former!r}) on {current}: {now} already has that name")
        STABLE_NAMES[current] = former
        return fn

    return declare


def callable_name(fn: Any) -> str:
    """A stable, JSON-able name for a user function, for fingerprints: its ``module:qualname``, or
    the former name its package declared with :func:`stable_name` when it moved."""
    mod = getattr(fn, "__module__", None) or type(fn).__module__
    qual = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    name = f"{mod}:{qual}"
    return STABLE_NAMES.get(name, name)
