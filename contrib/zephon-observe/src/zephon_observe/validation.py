"""Run-time validation: the conformance suite's rules, probed on a pipeline's own operators at start-up.

Registered as the observer of the ``validate`` option (:mod:`zephon_observe.plugin`): the pipeline
calls :func:`probe_steps` before it starts its engine. The kernel's ``zephon_core.validation`` still
resolves these names here.

Published operators pass the conformance suite before anyone installs them; a ``map_transform`` or a
hand-written :class:`~zephon_core.Operator` in a training script never went through it.
With ``options(validate="warn"|"strict")`` the pipeline, before its first batch, reads the first
records of lane 0 (:data:`PROBE_RECORDS`), passes them through the steps in order and probes each
user-defined step on its real input, driving its accumulator and worker directly (no threads but
one, below):

* run twice, the second time on another thread, the output must be identical (rules 1 and 3: no
  global random state, clock, thread identity or module-level counters);
* the same records pushed in other groupings give the same output (rule 6);
* after a flush the lane starts fresh: feeding the records again repeats the first output (rule 4);
* a lane's output does not change when another lane is fed in between, and accumulator state is
  JSON data (rule 2);
* every input is accounted for (output lineage or tombstone), and changing one input changes only
  outputs that name it (rule 5).

A finding names the step and the rule. ``"warn"`` emits a :class:`ValidationWarning` per finding;
``"strict"`` raises :class:`~zephon_core.ConfigError` with all of them. The probe reads and
runs a few dozen records per step (its cost is in ``pipeline.stats()["validation"]``). Registered
operators from packages (``tokenize``, ``pack_sequences``, the kernel's ``shuffle``...) are trusted:
their packages run the full suite.
"""

from __future__ import annotations

import json
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from zephon_core import ConfigError, Operator, Records, WorkSource
from zephon_core.conformance.driver import FLUSH, Driver, Output, split
from zephon_core.conformance.rules import rule
from zephon_core.conformance.samples import perturb
from zephon_core.plugin_api import ReportsState

PROBE_RECORDS = 48
"""Records read for the probe: enough for groupings and flushes to matter, few enough to stay well under a second."""

USER_FUNCTION_KINDS = frozenset({"map_transform", "flat_map", "stateful_transform"})
"""Registered kinds that wrap a user's functions: validated like operators the user wrote."""

GROUPS = (1, 2, 5, 3, 8, 1, 13)
PERTURBED = 4


class ValidationWarning(UserWarning):
    """A user-defined step broke a determinism rule on the probe (``options(validate="warn")``)."""


@dataclass(frozen=True)
class Finding:
    """Step ``operator`` broke rule ``rule`` on the probe; ``detail`` says how."""

    operator: str
    rule: int
    detail: str

    def __str__(self) -> str:
        return f"operator {self.operator!r} {rule(self.rule)}: {self.detail}"


def _same(a: Output, b: Output) -> bool:
    return a.digests == b.digests and a.keys == b.keys and a.lineage == b.lineage and a.dropped == b.dropped


def _feed(op: Operator, groups: Sequence[Records | str], lane: int = 0) -> Output:
    return Driver(op).feed(lane, groups)


def _on_other_thread(fn: Callable[[], Output]) -> Output:
    box: list[Any] = []

    def run() -> None:
        try:
            box.append(fn())
        except BaseException as exc:  # reported by the caller
            box.append(exc)

    t = threading.Thread(target=run, name="zephon-validate")
    t.start()
    t.join()
    result = box[0]
    if isinstance(result, BaseException):
        raise result
    out: Output = result
    return out


def _global_random_state() -> tuple[Any, ...]:
    import random

    import numpy as np

    legacy: Any = np.random.get_state()
    return (random.getstate(), legacy[1].tobytes())


def _shared_between_lanes(op: Operator) -> str | None:
    """The name of a mutable field that two lanes' fresh accumulators share (one object), if any."""
    a, b = op.new_accumulator(0), op.new_accumulator(1)
    mine = getattr(a, "__dict__", {})
    theirs = {id(v) for v in getattr(b, "__dict__", {}).values()}
    for key, value in mine.items():  # plain containers only: a shared operator or config object is fine
        if isinstance(value, (dict, list, set, bytearray)) and id(value) in theirs:
            return str(key)
    return None


def _fields(op: Operator) -> bytes | None:
    """The operator's own attributes, pickled (None when they do not pickle: then not compared)."""
    import pickle

    try:
        return pickle.dumps(vars(op))
    except Exception:
        return None


def _ids(lineage: Sequence[tuple[int, ...]]) -> set[int]:
    return {sid for lin in lineage for sid in lin}


def probe_operator(op: Operator, records: Records) -> list[Finding]:
    """Every rule ``op`` breaks on these input records (see the module docstring)."""
    name = op.name
    shared = _shared_between_lanes(op)
    if shared:
        return [
            Finding(
                name,
                2,
                f"the accumulators of lanes 0 and 1 share the object in their field {shared!r}: each lane's state "
                "must be its own (make it in new_accumulator)",
            )
        ]
    before = _global_random_state()
    fields = _fields(op)
    base = _feed(op, [records, FLUSH])
    drew = _global_random_state() != before
    if fields is not None and _fields(op) != fields:
        return [
            Finding(
                name,
                4,
                "running the step changed the operator object itself: state kept on the operator outlives the "
                "flushes that should reset each lane; keep it in the accumulator",
            )
        ]
    again = _on_other_thread(lambda: _feed(op, [records, FLUSH]))
    if not _same(base, again):
        first = next((i for i, (x, y) in enumerate(zip(base.digests, again.digests)) if x != y), None)
        at = f" (first difference at output {first})" if first is not None else ""
        if drew:
            return [
                Finding(
                    name,
                    3,
                    f"the same input gave different output on a second run{at}, and the step drew from the "
                    "global `random` or `numpy.random` state: take an rng parameter (seeded per record) instead",
                )
            ]
        return [
            Finding(
                name,
                1,
                f"the same input gave different output on a second run{at}: the step depends on the clock, "
                "the thread that ran it or module-level state",
            )
        ]
    found: list[Finding] = []
    regrouped = _feed(op, [*split(records, GROUPS), FLUSH])
    if not _same(base, regrouped):
        found.append(
            Finding(name, 6, "pushing the same records in other groups changed the output: it depends on grouping")
        )
    twice = _feed(op, [records, FLUSH, records, FLUSH])
    if twice.digests != base.digests * 2:
        found.append(
            Finding(
                name,
                4,
                "after a flush the lane did not start fresh: feeding the same records again gave other output "
                "(state kept outside the accumulator, e.g. on the operator)",
            )
        )
    d = Driver(op)
    half = len(records) // 2
    d.push(1, Records(records.payloads[:half], records.keys[:half], records.lineage[:half]))
    d.push(0, records)
    d.push(1, Records(records.payloads[half:], records.keys[half:], records.lineage[half:]))
    acc = d.acc(1)
    state = acc.state if isinstance(acc, ReportsState) else None
    d.flush(0)
    d.flush(1)
    alone = _feed(op, [records, FLUSH], lane=1)  # lane 1 on its own (a lane may seed by its number)
    if not (_same(d.out.get(0, Output()), base) and _same(d.out.get(1, Output()), alone)):
        found.append(
            Finding(name, 2, "a lane's output changed when another lane was fed in between: lanes share state")
        )
    if callable(state):
        try:
            json.dumps(state())
        except (TypeError, ValueError) as exc:
            found.append(Finding(name, 2, f"accumulator state() is not JSON data ({exc})"))
    missing = _ids(records.lineage) - _ids(base.lineage) - _ids(base.dropped)
    if missing:
        found.append(Finding(name, 5, f"{len(missing)} input records are neither in any output's lineage nor dropped"))
    else:
        found += _exact_lineage(op, records, base)
    return found


def _exact_lineage(op: Operator, records: Records, base: Output) -> list[Finding]:
    """Changing input ``i`` may change only outputs that name ``i`` in their lineage."""
    n = len(records)
    by_key = dict(zip(base.keys, zip(base.digests, base.lineage)))
    for i in sorted({n * j // PERTURBED for j in range(PERTURBED)}):
        payloads = list(records.payloads)
        payloads[i] = perturb(payloads[i])
        out = _feed(op, [Records(payloads, records.keys, records.lineage), FLUSH])
        sid = records.lineage[i][0] if records.lineage[i] else None
        for key, digest in zip(out.keys, out.digests):
            old = by_key.get(key)
            if old is not None and old[0] != digest and sid is not None and sid not in old[1]:
                return [
                    Finding(
                        op.name,
                        5,
                        f"changing input {i} changed an output whose lineage does not name it: lineage must name "
                        "every record whose data an output holds",
                    )
                ]
    return []


def first_records(fetch: Any, chunk: Any) -> Records:
    """The first :data:`PROBE_RECORDS` records of ``chunk``, read by the pipeline's fetch stage as a run would."""
    part = chunk.part(0, min(len(chunk), PROBE_RECORDS))
    out = Driver(fetch).feed(0, [part])
    return Records(out.payloads, out.keys, out.lineage)


def probe_pipeline(
    ops: Sequence[Operator], records: Records, is_user_defined: Callable[[Operator], bool]
) -> list[Finding]:
    """Probe each user-defined step on its real input (the output of the steps before it)."""
    found: list[Finding] = []
    for op in ops:
        if not len(records):
            break
        if is_user_defined(op):
            try:
                found += probe_operator(op, records)
            except Exception as exc:
                found.append(Finding(op.name, 9, f"the probe failed: {type(exc).__name__}: {exc}"))
                break
        try:
            out = _feed(op, [records, FLUSH])
        except Exception:
            break  # the run will report it with the record named
        records = Records(out.payloads, out.keys, out.lineage)
    return found


def probe_steps(
    mode: str,
    *,
    fetch: Operator,
    steps: Sequence[Operator],
    source: WorkSource,
    kind_of: Callable[[Operator], str | None],
) -> dict[str, Any]:
    """``options(validate=mode)``: probe the pipeline's user-defined steps on its first records.

    The pipeline calls this as it starts, before its engine (see
    :class:`~zephon_core.hookspecs.StepProbe`): ``fetch`` reads the first records of chunk 0 of
    ``source``; ``kind_of(step)`` is the registered kind a step was built by (None: the user wrote
    it), so registered operators from packages are trusted and functions a user passed are probed.

    Returns:
        What ``pipeline.stats()["validation"]`` shows: the mode, records read, seconds and findings.

    Raises:
        ConfigError: ``mode == "strict"`` and a step broke a rule (all findings in one line).
    """
    t0 = time.perf_counter()
    chunk = source.chunk(0)
    records = first_records(fetch, chunk) if chunk is not None else Records.empty()

    def user_defined(op: Operator) -> bool:
        kind = kind_of(op)
        return kind is None or kind in USER_FUNCTION_KINDS

    found = probe_pipeline(steps, records, user_defined)
    report = {
        "mode": mode,
        "records": len(records),
        "seconds": round(time.perf_counter() - t0, 4),
        "findings": [str(f) for f in found],
    }
    if found and mode == "strict":
        raise ConfigError(
            "validate='strict': " + "; ".join(str(f) for f in found) + " (the conformance suite's rules, "
            "probed on the first records; see zephon_observe.validation)"
        )
    for f in found:
        warnings.warn(str(f), ValidationWarning, stacklevel=4)  # at the code that started the pipeline
    return report
