"""Stage fusion: consecutive per-record steps on a runner that crosses processes share one pool and one task.

A step whose accumulator passes through (:class:`~zephon_core.ops.contract.PassesThrough`) holds no
state, so its worker can run right after the previous step's, in the same task; the training process
rebuilds the tombstones step by step, so no output changes. Which steps fuse, and what differs in
metrics, errors and time limits: ``docs/performance.md`` ("Steps that share a pool").
"""

from __future__ import annotations

import functools
import pickle
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from zephon_core.ops.contract import (
    Emitted,
    PassesThrough,
    Records,
    Traits,
    Work,
    WorkerFn,
    failed_slot,
    mark_fused_failure,
    passes_through,
)
from zephon_core.runtime.runners import runner_crosses_processes
from zephon_core.runtime.stage import materialize


def _pass_through(spec: Any) -> PassesThrough | None:
    """The step's accumulator if it declares it passes through (fanout one, with a worker), else None."""
    if spec.traits.fanout != "one" or not spec.traits.has_worker:
        return None
    try:
        acc = spec.new_accumulator(0)
    except Exception:  # an operator that cannot make one before it runs is not a pass-through
        return None
    return acc if passes_through(acc) else None


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


@dataclass(frozen=True, slots=True)
class FusedWorker:
    """Runs the steps' workers one after the other on one task (fanout one throughout).

    Returns ``(payloads, levels)``: a payload or None per slot, and, when a step after the head dropped
    records, the step at which each slot was dropped (-1: kept). A failure is re-raised marked with its
    step (:func:`~zephon_core.ops.contract.mark_fused_failure`) and, for an item, the task's slot.
    """

    workers: tuple[WorkerFn, ...]
    keyed: tuple[bool, ...]  # per step after the head: its task is (payloads, keys)
    names: tuple[str, ...] = ()

    def unpicklable_step(self, dumps: Callable[[Any], bytes] = pickle.dumps) -> str | None:
        """The first step whose worker ``dumps`` (the runner's serializer: Ray's takes lambdas) cannot
        pickle; asked only after pickling this failed."""
        for name, fn in zip(self.names, self.workers):
            try:
                dumps(fn)
            except Exception:
                return name
        return None

    def __call__(self, task: tuple[Any, list[int] | None]) -> tuple[list[Any], list[int] | None]:
        inner, keys = task
        try:
            out = list(self.workers[0](inner))
        except BaseException as exc:
            mark_fused_failure(exc, 0)
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
                index = failed_slot(exc)
                mark_fused_failure(exc, step, live[index] if index is not None and 0 <= index < len(live) else None)
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

    def step_name(self, step: int | None) -> str | None:
        """The name of fused step number ``step`` (from a marked failure), if there is one."""
        return self.parts[step].name if isinstance(step, int) and 0 <= step < len(self.parts) else None

    def materialize(self, result: Any, work: Work) -> Records | None:
        """Records from a fused task's result, tombstones in the order the unfused stages make them."""
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


def fuse(
    plans: Sequence[Any], make_plan: Any, crosses_processes: Callable[[str], bool] = runner_crosses_processes
) -> list[Any]:
    """Merge runs of fusable plans (same runner crossing processes, fanout one, pass-through after the head).

    ``make_plan(spec, runner, parallelism, timeout_s)`` builds a fused group's plan (the engine's ``StagePlan``);
    ``crosses_processes(name)`` says whether a runner crosses processes (default: the default plugin manager's).
    """
    fuses_on = functools.cache(crosses_processes)  # asked once per runner
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
        own_limit = plan.spec.timeout_s is not None
        if group and plan.runner == group[0].runner and not own_limit and _pass_through(plan.spec) is not None:
            group.append(plan)
            continue
        close()
        head = not own_limit and (plan.spec.traits.reads_pointers or _pass_through(plan.spec) is not None)
        if head and fuses_on(plan.runner):  # the fetch stage or a pass-through step starts a group
            group.append(plan)
        else:
            out.append(plan)
    close()
    return out
