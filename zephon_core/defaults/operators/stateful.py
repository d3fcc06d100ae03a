"""``stateful_transform``: the functional way to write an n-to-m operator.

``push(state, payload)`` runs serially per lane and returns output items; ``transform(item)`` runs
on the workers; ``flush(state)`` returns what the state still holds at a flush sentinel.

Lineage: which input records an output is made of
--------------------------------------------------
The user functions are opaque, so the kernel cannot see which held records went into an item.
Two rules, one exact and one merely safe:

* **Exact (explicit):** return ``Emit(item, sources)`` instead of a bare item. ``sources`` are the
  *indices* of the contributing records among those pushed to this lane since its state was made by
  ``init_state()`` (0 for the first; negative indices count back from the newest, so ``-1`` is the
  record being pushed, or in ``flush`` the last one pushed). Indices are plain ints the user can keep
  in the state next to the data they describe (for the common "append to a buffer, cut rows from its
  front" pattern :func:`take_sources` does the bookkeeping).
* **Safe (default):** a bare item is credited to every record pushed since the state was last
  *fresh*, i.e. equal to a new ``init_state()``. This is sound: a state equal to a fresh one
  behaves like a fresh lane (rules 2 and 4), so no earlier record can still reach an output.
  Anything less is not: the records pushed since the previous emission (the old rule) miss the
  document whose tail a buffer carried over. The price is imprecision: a buffer that is rarely
  empty credits each row with most of the window, so operators that carry data over should use
  ``Emit``.

A record that no output names is recorded as dropped (a tombstone) once it can no longer be named:
when the state becomes fresh again or at the flush. Lineage never changes an output's payload or key.

Randomness: ``push(state, payload, rng)`` and ``transform(item, rng)`` may declare a parameter
named ``rng`` and then get a generator of their own per record (``push``: seeded by the pushed
record's key) or per output item (``transform``: by the item's key), derived as in
:mod:`zephon_core.defaults.operators.mapping` from (``seed``, operator name, key). ``flush`` has no record to
seed from and gets none.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from zephon_core.defaults.operators.mapping import call_with_rng, check_seed, rng_base, sample_rng, takes_rng
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
_NEVER = object()  # stands for "no state is ever fresh"


@dataclass(frozen=True, slots=True)
class Emit:
    """An output item of ``push``/``flush`` together with the records it is made of.

    Attributes:
        item: what ``push`` would otherwise have returned bare (the worker's input, or the output
            payload when there is no ``transform``).
        sources: indices of the contributing records among those pushed to this lane since its
            state was created (0-based; negative counts back from the newest). Order is kept and
            becomes the order of the output's lineage; repeats are credited once.
    """

    item: Any
    sources: Iterable[int]


def take_sources(spans: list[list[Any]], units: int) -> list[int]:
    """Take ``units`` from the front of a FIFO of ``[record index, units held]`` pairs; return whose they were.

    The bookkeeping of a concatenate-and-cut operator, kept as plain lists so the state stays JSON:
    when a record's ``n`` tokens join the buffer, append ``[index, n]`` to ``spans``; when a row takes
    ``k`` tokens from the front, ``take_sources(spans, k)`` returns the indices to pass to
    :class:`Emit`, and shortens ``spans`` in place. Spans of zero units are skipped, so a record that
    put nothing in the buffer is never credited (it becomes a tombstone).
    """
    out: list[int] = []
    while spans and (units > 0 or spans[0][1] <= 0):
        index, have = spans[0]
        if have <= 0:
            spans.pop(0)
            continue
        out.append(index)
        if have > units:
            spans[0][1] = have - units
            return out
        spans.pop(0)
        units -= have
    return out


class _FunctionalAccumulator(Accumulator):
    """Runs the user functions for one lane and works out each output's lineage (module docstring)."""

    def __init__(self, op: StatefulTransform) -> None:
        self._op = op
        self._state = op.init_state()
        fresh = op.init_state()
        # a state that is the very object init_state() hands out again can never be told apart from
        # a fresh one, so freshness is then never assumed (the safe direction)
        self._fresh: Any = fresh if fresh is not self._state else _NEVER
        self._pushed = 0  # records pushed to this accumulator
        self._base = 0  # index of self._held[0]
        self._held: list[Lineage] = []  # lineage of each record pushed since the state was last fresh
        self._named: list[bool] = []  # whether some output has named that record
        self._last_key = 0
        self._push_rng = rng_base(op.seed, op.name) if op.push_takes_rng else None

    # -- lineage ----------------------------------------------------------------------------------
    def _is_fresh(self) -> bool:
        fresh = self._fresh
        if fresh is _NEVER:
            return False
        try:
            return bool(self._state == fresh)
        except Exception:  # e.g. numpy arrays in the state: cannot tell, so not fresh (the safe answer)
            return False

    def _forget(self, out: Records | Work) -> None:
        """No record held so far can reach an output any more: tombstone those no output named."""
        out.dropped.extend(lin for lin, named in zip(self._held, self._named) if not named)
        self._base = self._pushed
        self._held = []
        self._named = []

    def _everything_held(self) -> Lineage:
        self._named = [True] * len(self._named)
        return tuple(sid for lin in self._held for sid in lin)

    def _named_sources(self, sources: Iterable[int]) -> Lineage:
        held, named, base, n = self._held, self._named, self._base, self._pushed
        seen: set[int] = set()
        out: list[int] = []
        for raw in sources:
            if not isinstance(raw, int) or isinstance(raw, bool):
                raise ConfigError(
                    f"stateful_transform {self._op.name!r}: Emit sources must be ints (record indices), got {raw!r}"
                )
            i = raw + n if raw < 0 else raw
            if not base <= i < n:
                held_range = f"records {base}..{n - 1}" if base < n else "no records"
                raise ConfigError(
                    f"stateful_transform {self._op.name!r}: Emit source {raw} is not a record this lane still "
                    f"holds ({n} pushed since init_state(); {held_range} may be named, earlier ones were "
                    "released when the state equalled a fresh init_state())"
                )
            if i in seen:
                continue
            seen.add(i)
            named[i - base] = True
            out.extend(held[i - base])
        return tuple(out)

    # -- emission ---------------------------------------------------------------------------------
    def _emit(self, items: list[Any], key: int, out: Records | Work) -> None:
        default: Lineage | None = None
        is_work = isinstance(out, Work)
        for j, item in enumerate(items):
            if isinstance(item, Emit):
                lin = self._named_sources(item.sources)
                item = item.item
            else:
                if default is None:  # the same for every bare item of one call
                    default = self._everything_held()
                lin = default
            if is_work:
                out.task.append(item)  # type: ignore[union-attr]
            else:
                out.payloads.append(item)  # type: ignore[union-attr]
            out.keys.append(mix64(key, j))
            out.lineage.append(lin)

    def _container(self) -> Records | Work:
        return Work([], [], []) if self._op.transform is not None else Records.empty()

    def _finish(self, out: Records | Work) -> list[Emitted]:
        if not (out.keys or out.dropped):
            return []
        if isinstance(out, Work) and self._op.transform_takes_rng:
            out.task = (out.task, list(out.keys))  # the worker seeds each item's rng from its key
        return [out]

    def push(self, records: Records) -> list[Emitted]:
        out = self._container()
        out.dropped.extend(records.dropped)
        push = self._op.push_fn
        state = self._state
        base = self._push_rng
        for payload, key, lin in zip(records.payloads, records.keys, records.lineage):
            self._held.append(lin)
            self._named.append(False)
            self._pushed += 1
            self._last_key = key
            items = push(state, payload) if base is None else push(state, payload, rng=sample_rng(base, key))
            if items:
                self._emit(list(items), key, out)
            if self._is_fresh():
                self._forget(out)
        return self._finish(out)

    def flush(self) -> list[Emitted]:
        out = self._container()
        items = list(self._op.flush_fn(self._state)) if self._op.flush_fn else []
        if items:
            self._emit(items, self._last_key ^ _FLUSH_SALT, out)
        self._forget(out)
        return self._finish(out)

    def state(self) -> Any:
        return self._state


@dataclass(frozen=True, slots=True)
class _TransformWorker:
    fn: Callable[..., Any]
    rng_base: int | None = None  # set when transform takes rng: the task is then (items, keys)

    def __call__(self, task: Any) -> list[Any]:
        if self.rng_base is None:
            return apply_each(self.fn, task)
        return call_with_rng(self.fn, self.rng_base, task)


class StatefulTransform(Operator):
    """A custom n-to-m operator from four functions (see the module docstring).

    ``push`` and ``flush`` return a list of items, each bare or wrapped in :class:`Emit` to name
    the records it is made of; ``init_state`` is called once more per lane to know what a fresh
    state looks like (for the default lineage rule), so it must return a new object each call.
    ``push`` and ``transform`` may take ``rng`` (module docstring); ``seed`` varies their draws.
    """

    kind = "stateful_transform"

    def __init__(
        self,
        name: str,
        *,
        init_state: Callable[[], Any],
        push: Callable[..., list[Any] | None],
        flush: Callable[[Any], Iterable[Any]] | None = None,
        transform: Callable[..., dict[str, Any] | None] | None = None,
        parallelism: int = 1,
        runner: str | None = None,
        timeout_s: float | None = None,
        seed: int = 0,
    ) -> None:
        for label, fn in (("init_state", init_state), ("push", push)):
            if not callable(fn):
                raise ConfigError(f"stateful_transform {name!r}: {label} must be callable, got {fn!r}")
        super().__init__(parallelism=parallelism, runner=runner, name=name, timeout_s=timeout_s)
        self.init_state = init_state
        self.push_fn = push
        self.flush_fn = flush
        self.transform = transform
        self.traits = Traits(fanout="one", has_worker=transform is not None, stateful=True)
        what = f"stateful_transform {name!r}"
        self.seed = check_seed(seed, what)
        self.push_takes_rng = takes_rng(push, f"{what} push")
        self.transform_takes_rng = transform is not None and takes_rng(transform, f"{what} transform")
        if seed != 0 and not (self.push_takes_rng or self.transform_takes_rng):
            raise ConfigError(f"{what}: seed={seed} is given but neither push nor transform takes rng")

    def config(self) -> dict[str, Any]:
        fns = {"init_state": self.init_state, "push": self.push_fn, "flush": self.flush_fn, "transform": self.transform}
        config: dict[str, Any] = {k: (callable_name(v) if v is not None else None) for k, v in fns.items()}
        rng = [k for k, used in (("push", self.push_takes_rng), ("transform", self.transform_takes_rng)) if used]
        if rng:  # only then: fingerprints of pipelines without randomness stay as they were
            config.update(rng=rng, seed=self.seed)
        return config

    def new_accumulator(self, lane: int) -> Accumulator:
        return _FunctionalAccumulator(self)

    def worker(self) -> WorkerFn | None:
        if self.transform is None:
            return None
        return _TransformWorker(self.transform, rng_base(self.seed, self.name) if self.transform_takes_rng else None)
