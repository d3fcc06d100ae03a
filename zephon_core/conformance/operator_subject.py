"""What the operator conformance checks share: the operator under test and the pipelines built around it.

:class:`Subject` holds the operator's factory, its sample input and its claimed capabilities;
:func:`_run` runs it through :func:`~zephon_core.conformance.harness.run_global` with the suite's lanes
and windows. The checks themselves are grouped by rule in :mod:`~zephon_core.conformance.operator_isolation`,
:mod:`~zephon_core.conformance.operator_lineage` and :mod:`~zephon_core.conformance.operator_resume`.
"""

from __future__ import annotations

import json
import pickle
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from zephon_core.conformance import samples
from zephon_core.conformance.driver import FLUSH, Output, records_from, run_chain, split
from zephon_core.conformance.harness import run_global
from zephon_core.conformance.rules import Capabilities
from zephon_core.defaults.sources.mixture import MixtureSpec
from zephon_core.defaults.sources.static_mixture import StaticMixtureWorkSource
from zephon_core.ops.contract import Lineage, Operator, Records
from zephon_core.pipeline import Pipeline
from zephon_core.work.dataset import Dataset

OperatorFactory = Callable[..., Operator]
"""``factory(parallelism=1, runner=None) -> Operator``: a fresh, independent instance per call."""

LANES = 4
CHUNK = 16
FLUSH_EVERY = 2
EXACT_WINDOWS = 2
"""Flush windows of input the per-output lineage check replays once per source sample (cost ~ n²)."""


def _windowed(records: Records) -> list[Records | str]:
    """Records in groups of ``CHUNK`` with a flush every ``FLUSH_EVERY`` groups and at the end, as a lane sees them."""
    groups: list[Records | str] = []
    for i, g in enumerate(split(records, [CHUNK] * (len(records) // CHUNK + 1))):
        groups.append(g)
        if i % FLUSH_EVERY == FLUSH_EVERY - 1:
            groups.append(FLUSH)
    return [*groups, FLUSH]


def _by_identity(out: Output) -> dict[tuple[int, int], tuple[int, bytes, Lineage]]:
    """Outputs by (key, occurrence): keys are unique within a lane, the occurrence guards a bad operator."""
    seen: dict[int, int] = {}
    res: dict[tuple[int, int], tuple[int, bytes, Lineage]] = {}
    for pos, (digest, key, lin) in enumerate(zip(out.digests, out.keys, out.lineage)):
        occ = seen.get(key, 0)
        seen[key] = occ + 1
        res[(key, occ)] = (pos, digest, lin)
    return res


def _first_difference(a: Sequence[Any], b: Sequence[Any]) -> str:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"first difference at position {i}"
    return f"lengths {len(a)} and {len(b)}"


@dataclass
class Subject:
    """The operator under test plus everything needed to build pipelines around it."""

    factory: OperatorFactory
    records: list[dict[str, Any]]
    upstream: list[Callable[[], Operator]]
    caps: Capabilities

    def make(self, parallelism: int = 1, runner: str | None = None) -> Operator:
        op = self.factory(parallelism=parallelism, runner=runner)
        if not isinstance(op, Operator):
            raise TypeError(f"operator_factory returned {type(op).__name__}, not an Operator")
        return op

    def source(self, records: list[dict[str, Any]] | None = None) -> StaticMixtureWorkSource:
        recs = records if records is not None else self.records
        cut = (2 * len(recs)) // 3
        a = Dataset.from_records("conformance_a", recs[:cut], shard_size=40)
        b = Dataset.from_records("conformance_b", recs[cut:], shard_size=40)
        return StaticMixtureWorkSource(
            [a, b],
            mixture=MixtureSpec({"conformance_a": 2.0, "conformance_b": 1.0}, ratios=True),
            chunk_size=CHUNK,
            seed=11,
        )

    def pipeline(
        self,
        parallelism: int,
        *,
        before: Sequence[Operator] = (),
        after: Sequence[Operator] = (),
        source: StaticMixtureWorkSource | None = None,
        runner: str | None = None,
    ) -> Pipeline:
        p = Pipeline(source or self.source())
        for up in self.upstream:
            p.add(up())
        for op in before:
            p.add(op)
        p.add(self.make(parallelism, runner))
        for extra in after:
            p.add(extra)
        return p.batch(1, collate=samples.digest_collate)

    def builder(self, **kw: Any) -> Callable[[int], Pipeline]:
        return lambda parallelism: self.pipeline(parallelism, **kw)

    def input_records(self) -> Records:  # records as the operator under test receives them
        recs = records_from(self.records, chunk_size=CHUNK)
        return run_chain([up() for up in self.upstream], recs) if self.upstream else recs


def _run(subject: Subject, **kw: Any) -> list[str]:
    build_kw = {k: kw.pop(k) for k in ("before", "after", "source") if k in kw}
    kw.setdefault("lanes", LANES)
    kw.setdefault("flush_every", FLUSH_EVERY)
    return run_global(subject.builder(**build_kw), **kw).hashes


def _subprocess_main(path: str) -> None:
    """Entry point of the fresh-interpreter check (runs ``python -c`` with another hash seed)."""
    import importlib
    import importlib.util

    with open(path, "rb") as f:  # written by the suite itself moments ago, never user input
        module_name, module_file, blob = pickle.load(f)
    if module_name and module_file:
        try:
            importlib.import_module(module_name)
        except ImportError:  # a test module pytest imported by path: load it the same way
            spec = importlib.util.spec_from_file_location(module_name, module_file)
            if spec is not None and spec.loader is not None:
                module = importlib.util.module_from_spec(spec)
                sys.modules[module_name] = module
                spec.loader.exec_module(module)
    factory, upstream, records = pickle.loads(blob)
    subject = Subject(factory, records, upstream, Capabilities())
    print(json.dumps(_run(subject, runner="inline")))


def _clone(op: Operator) -> Operator:
    """A fresh copy of a built-in operator (each pipeline needs its own instances)."""
    import copy

    return copy.copy(op)
