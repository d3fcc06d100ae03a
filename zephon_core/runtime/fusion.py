"""Stage fusion: consecutive per-record steps on the processes runner share one pool and one task.

Why. On the processes runner every stage boundary is a round trip between processes: a record read
by a fetch worker is copied into a segment for the training process, copied again into a segment for
a map worker, and copied back. For image-sized records those copies, and the training process's
time spent moving them, cost more than the work (``benchmarks/bench_transport.py``). A map step whose
accumulator is the kernel's :class:`~zephon_core.ops.mapping.PassThrough` holds no state: it would
hand the previous stage's output to its worker unchanged, one task per incoming run of records. So
the kernel can run that worker right after the previous stage's worker, in the same task, and a
record crosses between processes once.

What stays exactly as without fusion: records, keys, lineage and tombstones, in the same order (the
fused worker says at which step each dropped record was dropped, and the training process rebuilds
the tombstones step by step), so hashes, checkpoints and manifests do not change. What differs is
only bookkeeping: the fused steps show up in metrics as one stage named ``fetch+flip`` and run
``max(parallelism)`` workers; a task's time limit is the sum of the steps' limits (none if a step
has none). A step that fails, or cannot be pickled, is still named in the error; a worker process
that dies is reported under the fused name (which step it was running is not known).

Fusion applies to steps that run on the ``processes`` runner with fanout one and set no
``timeout_s`` of their own (a hang in such a step must be caught on its own clock, so it keeps its
own pool): the fetch stage or a pass-through map as the head, followed by pass-through maps
(``map_transform`` and operators built on it). ``options(fuse=False)`` turns fusion off, e.g. to see each
step's own metrics.
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from zephon_core.ops.contract import Emitted, Records, Traits, Work, WorkerFn
from zephon_core.ops.mapping import PassThrough

FUSED_RUNNERS = ("processes",)
"""Runners whose stage boundaries cost a copy between processes, where fusion pays."""


def _pass_through(spec: Any) -> PassThrough | None:
    """The step's accumulator if it is the kernel's stateless pass-through (fanout one), else None."""
    if spec.traits.fanout != "one" or not spec.traits.has_worker:
        return None
    try:
        acc = spec.new_accumulator(0)
    except Exception:  # an operator that cannot make one before it runs is not a pass-through
        return None
    return acc if type(acc) is PassThrough else None


def fusable_head(spec: Any) -> bool:
    """Whether a step can start a fused group: the fetch stage, or a pass-through map."""
    return getattr(spec, "kind", None) == "fetch" or _pass_through(spec) is not None


class FusedAccumulator:
    """The head step's accumulator; its work items also carry the keys when a later step needs them."""

    def __init__(self, head: Any, keyed: bool) -> None:
        self.head = head
        self.keyed = keyed

    def push(self, body: Any) -> list[Emitted]:
        return [self._wrap(e) for e in self.head.push(body)]

    def flush(self) -> list[Emitted]:
        return [self._wrap(e) for e in self.head.flush()]

    def _wrap(self, item: Emitted) -> Emitted:
        if isinstance(item, Records):  # only tombstones (a pass-through head emits no other records)
            return item
        return Work((item.task, item.keys if self.keyed else None), item.keys, item.lineage, item.dropped, item.meta)


def _tag(exc: BaseException, step: int, index: int | None = None) -> None:
    """Mark a failure with the fused step that raised it and, for an item failure, the task's slot."""
    try:
        exc.__dict__["fused_step"] = step
        if index is not None:
            exc.__dict__["index"] = index
    except AttributeError:  # an exception type without a __dict__: reported under the fused stage's name
        pass


@dataclass(frozen=True, slots=True)
class FusedWorker:
    """Runs the steps' workers one after the other on one task (fanout one throughout).

    Returns ``(payloads, levels)``: a payload or None per slot of the task, and, when a step after the
    head dropped records, the step at which each slot was dropped (-1: kept). A failure is re-raised
    with ``fused_step`` (which step) and, for an item failure, ``index`` mapped to the task's slot.
    """

    workers: tuple[WorkerFn, ...]
    keyed: tuple[bool, ...]  # per step after the head: its task is (payloads, keys)
    names: tuple[str, ...] = ()

    def unpicklable_step(self) -> str | None:
        """The first step whose worker cannot be pickled (asked only after pickling this failed)."""
        for name, fn in zip(self.names, self.workers):
            try:
                pickle.dumps(fn)
            except Exception:
                return name
        return None

    def __call__(self, task: tuple[Any, list[int] | None]) -> tuple[list[Any], list[int] | None]:
        inner, keys = task
        try:
            out = list(self.workers[0](inner))
        except BaseException as exc:
            _tag(exc, 0)
            raise
        levels: list[int] | None = None
        for step, (fn, keyed) in enumerate(zip(self.workers[1:], self.keyed), 1):
            live = [i for i, p in enumerate(out) if p is not None]
            if not live:
                break
            payloads = [out[i] for i in live]
            sub: Any = (payloads, [keys[i] for i in live]) if keyed and keys is not None else payloads
            try:
                res = fn(sub)
                if not isinstance(res, (list, tuple)) or len(res) != len(live):
                    got = len(res) if isinstance(res, (list, tuple)) else type(res).__name__
                    raise TypeError(f"worker returned {got} outputs for {len(live)} inputs")
            except BaseException as exc:
                index = getattr(exc, "index", None)
                _tag(exc, step, live[index] if isinstance(index, int) and 0 <= index < len(live) else None)
                raise
            for i, r in zip(live, res):
                if r is None:
                    if levels is None:
                        levels = [-1] * len(out)
                    levels[i] = step
                out[i] = r
        return out, levels


class FusedSpec:
    """Several steps run as one stage (see the module docstring)."""

    def __init__(self, parts: Sequence[Any]) -> None:
        self.parts = tuple(parts)
        self.name = "+".join(p.name for p in self.parts)
        self.traits = Traits(fanout="one")
        self._keyed = tuple(bool(acc.with_keys) for acc in (_pass_through(p) for p in self.parts[1:]) if acc)

    def new_accumulator(self, lane: int) -> FusedAccumulator:
        return FusedAccumulator(self.parts[0].new_accumulator(lane), any(self._keyed))

    def worker(self) -> FusedWorker:
        return FusedWorker(tuple(p.worker() for p in self.parts), self._keyed, tuple(p.name for p in self.parts))

    def step_name(self, step: Any) -> str | None:
        """The name of fused step number ``step`` (from a failure's ``fused_step``), if there is one."""
        return self.parts[step].name if isinstance(step, int) and 0 <= step < len(self.parts) else None

    def materialize(self, result: Any, work: Work) -> Records | None:
        """Records from a fused task's result, tombstones in the order the unfused stages make them."""
        from zephon_core.runtime.stage import materialize

        if not (isinstance(result, tuple) and len(result) == 2):
            raise TypeError(f"fused worker returned {type(result).__name__}, not (payloads, levels)")
        payloads, levels = result
        out = materialize("one", payloads, work)  # its new tombstones are in slot order
        if out is not None and levels is not None:  # some were dropped after the head: step order instead
            if len(levels) != len(payloads):
                raise TypeError(f"fused worker returned {len(levels)} drop levels for {len(payloads)} outputs")
            steps = [max(level, 0) for p, level in zip(payloads, levels) if p is None]
            new = out.dropped[len(work.dropped) :]
            out.dropped[len(work.dropped) :] = [lin for _, lin in sorted(zip(steps, new), key=lambda sl: sl[0])]
        return out


def fuse(plans: Sequence[Any], make_plan: Any) -> list[Any]:
    """Merge runs of fusable plans (same fused runner, fanout one, pass-through after the head).

    ``make_plan(spec, runner, parallelism, timeout_s)`` builds the fused group's plan (the engine's
    ``StagePlan``); plans that do not fuse are returned as they are.
    """
    out: list[Any] = []
    group: list[Any] = []

    def close() -> None:
        if len(group) == 1:
            out.append(group[0])
        elif group:
            limits = [p.timeout_s for p in group]
            timeout = None if any(t is None for t in limits) else sum(limits)
            spec = FusedSpec([p.spec for p in group])
            out.append(make_plan(spec, group[0].runner, max(p.parallelism for p in group), timeout))
        group.clear()

    for plan in plans:
        own_limit = getattr(plan.spec, "timeout_s", None) is not None  # its hang must be caught on its own clock
        if group and plan.runner == group[0].runner and not own_limit and _pass_through(plan.spec) is not None:
            group.append(plan)
            continue
        close()
        if plan.runner in FUSED_RUNNERS and not own_limit and fusable_head(plan.spec):
            group.append(plan)
        else:
            out.append(plan)
    close()
    return out
