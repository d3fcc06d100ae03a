"""``OperatorConformance``: the determinism checks every operator must pass.

Subclass it and override ``operator_factory`` (and, if your operator needs other input,
``sample_records`` or ``upstream``)::

    from zephon_core.conformance import OperatorConformance

    class TestMyOp(OperatorConformance):
        @pytest.fixture
        def operator_factory(self):
            return functools.partial(MyOp, window=4)   # called as factory(parallelism=, runner=)

The suite runs the operator inside real pipelines (fetch → upstream → operator → batch of one
digest row) on two datasets mixed 2:1, and through a direct driver that controls grouping, lanes
and flushes. Every failure names the rule it enforces (see :mod:`zephon_core.conformance.rules`).
"""

from __future__ import annotations

import copy
import json
import os
import pickle
import random
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from zephon_core.conformance import samples
from zephon_core.conformance.driver import FLUSH, Driver, Output, records_from, run_chain, split
from zephon_core.conformance.harness import run_global
from zephon_core.conformance.rules import Capabilities, SuiteBase, rule
from zephon_core.hashing import digest_payload
from zephon_core.ops.contract import Lineage, Operator, Records
from zephon_core.pipeline import Pipeline
from zephon_core.work.dataset import Dataset
from zephon_core.work.mixture import MixtureSpec
from zephon_core.work.source import StaticMixtureWorkSource

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


class OperatorConformance(SuiteBase):
    """Base class of operator conformance tests; not collected until subclassed."""

    __test__ = False  # only subclasses are collected

    # -- extension points (override these fixtures) -------------------------------------------
    @pytest.fixture
    def operator_factory(self) -> OperatorFactory:
        """``factory(parallelism=, runner=) -> Operator``; make it picklable (module-level or partial)."""
        raise NotImplementedError("override the operator_factory fixture")

    @pytest.fixture
    def sample_records(self) -> list[dict[str, Any]]:
        """Input payloads (default: English paragraphs with fields ``text`` and ``n``)."""
        return samples.text_records()

    @pytest.fixture
    def upstream(self) -> list[Callable[[], Operator]]:
        """Factories of operators placed before the one under test (e.g. a tokenizer before a packer)."""
        return []

    @pytest.fixture
    def capabilities(self) -> Capabilities:
        """What the operator claims; unclaimed features are reported as skips."""
        return Capabilities()

    @pytest.fixture
    def perturb_payload(self) -> Callable[[dict[str, Any]], dict[str, Any]]:
        """``payload -> payload`` with other content but the same structure, for the lineage check.

        The default (:func:`zephon_core.conformance.samples.perturb`) changes text, arrays and lists
        but keeps lengths, whitespace and scalar ints. Override it when your operator arranges records
        by something the default changes (e.g. it groups by a string field): keep what decides the
        arrangement, change what ends up in outputs. It must not modify its argument.
        """
        return samples.perturb

    @pytest.fixture
    def subject(
        self,
        operator_factory: OperatorFactory,
        sample_records: list[dict[str, Any]],
        upstream: list[Callable[[], Operator]],
        capabilities: Capabilities,
    ) -> Subject:
        return Subject(operator_factory, list(sample_records), list(upstream), capabilities)

    @pytest.fixture
    def baseline(self, subject: Subject) -> list[str]:
        hashes = _run(subject, runner="inline")
        assert len(hashes) >= 8, "the sample input must give at least 8 global steps; give more sample_records"
        return hashes

    # -- rule 1: the worker is a pure function ----------------------------------------------------
    @pytest.mark.parametrize("parallelism", [3, 8])
    def test_parallelism_does_not_change_output(self, subject: Subject, baseline: list[str], parallelism: int) -> None:
        got = _run(subject, runner="threads", parallelism=parallelism)
        assert got == baseline, (
            f"{rule(1)} global batches differ between inline parallelism 1 and threads parallelism {parallelism} "
            f"({_first_difference(baseline, got)}): the worker depends on worker identity, timing or shared state"
        )

    @pytest.mark.parametrize("runner", ["threads", "processes"])
    def test_runner_does_not_change_output(self, subject: Subject, baseline: list[str], runner: str) -> None:
        if runner == "processes" and not subject.caps.processes:
            pytest.skip("operator does not claim the processes runner (Capabilities.processes=False)")
        got = _run(subject, runner=runner, parallelism=2)
        assert got == baseline, (
            f"{rule(1)} global batches differ between the inline and {runner} runners "
            f"({_first_difference(baseline, got)}): the worker depends on its process, module state or timing"
        )

    def test_worker_pickles(self, subject: Subject) -> None:
        op = subject.make()
        if not op.traits.has_worker:
            pytest.skip("operator has no worker")
        if not subject.caps.processes:
            pytest.skip("operator does not claim the processes runner")
        worker = op.worker()
        try:
            clone = pickle.loads(pickle.dumps(worker))
        except Exception as exc:
            pytest.fail(f"{rule(1)} the worker cannot be pickled for process workers: {exc}")
        recs = subject.input_records()
        d1, d2 = Driver(op), Driver(subject.make())
        d2.worker = clone
        groups: list[Records | str] = [*split(recs, [CHUNK] * (len(recs) // CHUNK + 1)), FLUSH]
        a, b = d1.feed(0, groups), d2.feed(0, groups)
        assert a.digests == b.digests, f"{rule(1)} a pickled copy of the worker computes different output"

    # -- rule 2: state is per lane and plain data -------------------------------------------------
    @pytest.mark.parametrize("world_size", [2, 4])
    def test_world_size_does_not_change_global_batches(
        self, subject: Subject, baseline: list[str], world_size: int
    ) -> None:
        got = _run(subject, runner="threads", world_size=world_size, parallelism=2)
        assert got == baseline, (
            f"{rule(2)} global batches differ between 1 and {world_size} ranks over {LANES} lanes "
            f"({_first_difference(baseline, got)})"
        )

    def test_lane_purity(self, subject: Subject) -> None:
        recs = subject.input_records()
        half = len(recs) // 2
        lane0 = split(recs, [half])[0]
        other = split(recs, [half])[1] if len(recs) > half else lane0
        groups0 = split(lane0, [CHUNK] * (half // CHUNK + 1))
        groups1 = split(other, [CHUNK] * (half // CHUNK + 1))
        mixed = Driver(subject.make())
        for i in range(max(len(groups0), len(groups1))):
            if i < len(groups1):
                mixed.push(1, groups1[i])
            if i < len(groups0):
                mixed.push(0, groups0[i])
        mixed.flush(1)
        mixed.flush(0)
        alone = Driver(subject.make()).feed(0, [*groups0, FLUSH])
        got = mixed.out.get(0, Output())
        assert got.digests == alone.digests and got.lineage == alone.lineage, (
            f"{rule(2)} lane 0's output changes when lane 1 carries data "
            f"({_first_difference(alone.digests, got.digests)}): keep state per lane (a fresh accumulator per lane)"
        )

    def test_state_and_config_are_json(self, subject: Subject) -> None:
        op = subject.make()
        try:
            config = op.config()
            assert json.loads(json.dumps(config)) == config
        except (TypeError, ValueError, AssertionError) as exc:
            pytest.fail(f"{rule(2)} config() is not JSON-compatible: {exc!r}")
        if not subject.caps.json_state:
            pytest.skip("operator does not claim JSON state (Capabilities.json_state=False)")
        recs = subject.input_records()
        d = Driver(op)
        for g in split(recs, [CHUNK] * 6):
            d.push(0, g)
            state = d.acc(0).state()
            try:
                text = json.dumps(state)
            except (TypeError, ValueError) as exc:
                pytest.fail(f"{rule(2)} accumulator state is not plain JSON-compatible data: {exc}")
            assert json.loads(text) == state, f"{rule(2)} accumulator state does not survive a JSON round trip"

    # -- rule 3: randomness comes from the data ---------------------------------------------------
    def test_no_dependence_on_global_random_state(self, subject: Subject, baseline: list[str]) -> None:
        runner = "processes" if subject.caps.processes else "threads"
        saved = os.environ.get("PYTHONHASHSEED")
        results = []
        try:
            for seed in (1, 2):
                random.seed(seed)
                np.random.seed(seed)
                os.environ["PYTHONHASHSEED"] = str(seed)  # inherited by spawned workers
                results.append(_run(subject, runner=runner, parallelism=2))
        finally:
            if saved is None:
                os.environ.pop("PYTHONHASHSEED", None)
            else:
                os.environ["PYTHONHASHSEED"] = saved
        for got in results:
            assert got == baseline, (
                f"{rule(3)} output changes with the global random/numpy seeds or the hash seed "
                f"({_first_difference(baseline, got)}): derive randomness by hashing (seed, lane, record key)"
            )

    @pytest.mark.slow
    def test_fresh_interpreters_agree(self, subject: Subject, baseline: list[str], tmp_path: Path) -> None:
        if not subject.caps.subprocess_factory:
            pytest.skip("operator factory cannot be rebuilt in a fresh interpreter (Capabilities.subprocess_factory)")
        module_name = getattr(subject.factory, "__module__", None) or getattr(
            getattr(subject.factory, "func", None), "__module__", None
        )
        mod = sys.modules.get(module_name or "", None)
        try:
            inner = pickle.dumps((subject.factory, subject.upstream, subject.records))
            blob = pickle.dumps((module_name, getattr(mod, "__file__", None), inner))
        except Exception as exc:
            pytest.skip(f"operator factory does not pickle ({exc}); use a module-level function or functools.partial")
        path = tmp_path / "subject.pkl"
        path.write_bytes(blob)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        outs = []
        for seed in ("3", "4"):
            env["PYTHONHASHSEED"] = seed
            proc = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    f"from zephon_core.conformance.operators import _subprocess_main; _subprocess_main({str(path)!r})",
                ],
                capture_output=True,
                text=True,
                env=env,
                timeout=600,
            )
            if proc.returncode != 0 and (
                "ModuleNotFoundError" in proc.stderr or "AttributeError: Can't get" in proc.stderr
            ):
                pytest.skip(
                    f"operator factory is not importable in a fresh interpreter: {proc.stderr.strip().splitlines()[-1]}"
                )
            assert proc.returncode == 0, proc.stderr[-2000:]
            outs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        for got in outs:
            assert got == baseline, (
                f"{rule(3)} a fresh interpreter with another PYTHONHASHSEED computes different batches "
                f"({_first_difference(baseline, got)}): do not use hash(), id() or set order for decisions"
            )

    # -- rule 4: a flush resets the lane ------------------------------------------------------------
    def test_flush_resets_lane(self, subject: Subject) -> None:
        op = subject.make()
        if not (subject.caps.resets_on_flush and op.traits.resets_on_flush):
            pytest.skip("operator does not reset at flush sentinels (batch keeps rows across windows by design)")
        recs = subject.input_records()
        first, second = split(recs, [len(recs) // 2])[:2]
        d = Driver(op)
        d.feed(0, [*split(first, [CHUNK] * 64), FLUSH])
        n_before = len(d.out[0].digests)
        after = d.feed(0, [*split(second, [CHUNK] * 64), FLUSH])
        fresh = Driver(subject.make()).feed(0, [*split(second, [CHUNK] * 64), FLUSH])
        got = after.digests[n_before:]
        assert got == fresh.digests, (
            f"{rule(4)} after a flush the lane does not behave like a fresh instance "
            f"({_first_difference(fresh.digests, got)}): emit everything held at flush and keep no state "
            "outside the accumulator"
        )

    # -- rule 5: lineage is exact and conserved ---------------------------------------------------
    def test_lineage_is_conserved(self, subject: Subject) -> None:
        recs = subject.input_records()
        out = Driver(subject.make()).feed(0, _windowed(recs))
        given = {sid for lin in recs.lineage for sid in lin} | {sid for lin in recs.dropped for sid in lin}
        seen_out = {sid for lin in out.lineage for sid in lin}
        seen_dropped = {sid for lin in out.dropped for sid in lin}
        invented = (seen_out | seen_dropped) - given - {sid for lin in recs.dropped for sid in lin}
        assert not invented, f"{rule(5)} outputs claim source samples that were never input: {sorted(invented)[:5]}"
        lost = given - seen_out - seen_dropped
        assert not lost, (
            f"{rule(5)} {len(lost)} input samples neither reach an output nor are recorded as dropped "
            f"(e.g. sample ids {sorted(lost)[:5]}): a filter must emit a tombstone (Records.dropped)"
        )

    def test_lineage_is_exact(
        self, subject: Subject, perturb_payload: Callable[[dict[str, Any]], dict[str, Any]]
    ) -> None:
        """Each output's lineage names exactly the inputs whose data it holds, checked from outside.

        An operator is a black box, so "input X contributed to output Y" is tested by changing X:
        for every source sample of the first ``EXACT_WINDOWS`` flush windows, the records carrying it
        are given other content with the same structure (``perturb_payload``) and the same input is
        replayed through a fresh operator. Outputs are matched by key, which a structure-preserving
        change leaves alone. Then:

        * an output whose lineage does not name the sample must come out unchanged, and an output
          that appears or disappears must name it (else the lineage misses a contributor: the row
          that holds the tail of one document and the head of the next must name both);
        * with ``Capabilities.exact_lineage``, an output that names the sample among two or more
          must change (else it names a record whose data it does not hold). Single-source outputs
          are exempt: every output is credited to some input, and crediting the wrong one is
          caught by the first check, through the input that really contributed.

        Removing an input instead would not work: it shifts every later cut of a concatenating
        operator, so every later output would "depend" on it. The cost is one replay of
        ``EXACT_WINDOWS * FLUSH_EVERY * CHUNK`` records per source sample.
        """
        recs = subject.input_records()
        n = min(len(recs), EXACT_WINDOWS * FLUSH_EVERY * CHUNK)
        payloads, keys, lineage = recs.payloads[:n], recs.keys[:n], recs.lineage[:n]

        def run(ps: list[dict[str, Any]]) -> dict[tuple[int, int], tuple[int, bytes, Lineage]]:
            records = Records([dict(p) for p in ps], list(keys), list(lineage))
            return _by_identity(Driver(subject.make()).feed(0, _windowed(records)))

        base = run(payloads)
        exact = subject.caps.exact_lineage
        missing: list[str] = []
        extra: list[str] = []
        tested = 0
        for sid in dict.fromkeys(s for lin in lineage for s in lin):
            changed = list(payloads)
            differs = False
            for i, lin in enumerate(lineage):
                if sid in lin:
                    changed[i] = perturb_payload(copy.deepcopy(payloads[i]))
                    differs |= digest_payload(changed[i]) != digest_payload(payloads[i])
            if not differs:
                continue  # nothing the perturbation can change (e.g. only ints): no evidence either way
            tested += 1
            try:
                got = run(changed)
            except Exception as exc:
                raise RuntimeError(
                    f"the operator failed on input whose sample {sid} was changed by perturb_payload "
                    f"({type(exc).__name__}: {exc}); override the perturb_payload fixture with a change it accepts"
                ) from exc
            for ident, (pos, digest, lin) in base.items():
                after = got.get(ident)
                names = sid in lin
                if after is None or after[1] != digest:
                    if not names:
                        how = "disappears" if after is None else "changes"
                        missing.append(f"output {pos} {how} when sample {sid} changes, but its lineage {lin[:8]}")
                elif names and exact and len(set(lin)) > 1:
                    extra.append(f"output {pos} names sample {sid} among {len(set(lin))} but stays the same")
            missing += [
                f"an output (key {ident[0]:#x}) appears when sample {sid} changes, but its lineage {lin[:8]}"
                for ident, (_, _, lin) in got.items()
                if ident not in base and sid not in lin
            ]
            if len(missing) >= 3 or len(extra) >= 3:
                break
        if not tested:
            pytest.skip("perturb_payload changed no input record: override the perturb_payload fixture")
        assert not missing, (
            f"{rule(5)} an output holds data of an input its lineage does not name: "
            + "; ".join(f"{m} does not name it" for m in missing[:3])
            + ". Credit every record whose data reaches an output (with stateful_transform, return "
            "Emit(item, sources) naming every record the item holds data of, including carried-over ones)"
        )
        assert not extra, (
            f"{rule(5)} an output's lineage names an input whose data it does not hold: "
            + "; ".join(extra[:3])
            + ". Credit only the records an output is made of (stateful_transform: name them with Emit), "
            "or claim Capabilities(exact_lineage=False) if your lineage is a deliberate superset"
        )

    # -- rule 6: grouping does not matter ---------------------------------------------------------
    def test_grouping_does_not_change_output(self, subject: Subject) -> None:
        recs = subject.input_records()
        n = len(recs)
        rng = np.random.default_rng(5)
        layouts = {
            "one group": [n],
            "groups of 1": [1] * n,
            "groups of 7": [7] * (n // 7 + 1),
            "random groups": rng.integers(1, 40, size=n).tolist(),
        }
        flush_at = n // 2
        results = {}
        for name, sizes in layouts.items():
            first, second = split(recs, [flush_at])[:2]
            groups: list[Records | str] = [*split(first, sizes), FLUSH, *split(second, sizes), FLUSH]
            results[name] = Driver(subject.make()).feed(0, groups)
        ref = results["one group"]
        for name, out in results.items():
            assert out.digests == ref.digests and out.lineage == ref.lineage, (
                f"{rule(6)} output differs when the same records arrive in {name} instead of one group "
                f"({_first_difference(ref.digests, out.digests)}): decide per record, not per pushed group"
            )

    # -- rule 7: resume equals the uninterrupted run ----------------------------------------------
    @pytest.mark.slow
    def test_resume_from_every_cut_point(self, subject: Subject, baseline: list[str]) -> None:
        lanes = 2
        full = run_global(subject.builder(), lanes=lanes, flush_every=FLUSH_EVERY, runner="inline")
        window = CHUNK * FLUSH_EVERY  # global steps per window when one record makes one row
        cuts = [c for c in [*range(1, window + 1), *range(window + 1, 2 * window + 1, 4)] if c < len(full.hashes)]
        for cut in cuts:
            first = run_global(subject.builder(), lanes=lanes, flush_every=FLUSH_EVERY, runner="inline", steps=cut)
            rest = run_global(
                subject.builder(), lanes=lanes, flush_every=FLUSH_EVERY, runner="threads", resume=first.state
            )
            got = first.hashes + rest.hashes
            assert got == full.hashes, (
                f"{rule(7)} resuming after global step {cut} differs from the uninterrupted run "
                f"({_first_difference(full.hashes, got)}): state must be rebuilt by replay from the last flush"
            )

    @pytest.mark.parametrize(("before", "after"), [(2, 4), (4, 1), (2, 1)])
    def test_resume_on_another_world_size(self, subject: Subject, baseline: list[str], before: int, after: int) -> None:
        for cut in sorted({1, len(baseline) // 3, (2 * len(baseline)) // 3}):
            first = run_global(
                subject.builder(), lanes=LANES, world_size=before, flush_every=FLUSH_EVERY, runner="threads", steps=cut
            )
            rest = run_global(
                subject.builder(),
                lanes=LANES,
                world_size=after,
                flush_every=FLUSH_EVERY,
                runner="threads",
                parallelism=2,
                resume=first.state,
            )
            got = first.hashes + rest.hashes
            assert got == baseline, (
                f"{rule(7)} checkpoint at step {cut} on {before} ranks, resumed on {after}: "
                f"global batches differ ({_first_difference(baseline, got)})"
            )

    @pytest.mark.slow
    def test_differential_random_pipelines(self, subject: Subject, request: pytest.FixtureRequest) -> None:
        """Hypothesis: random pipelines around the operator, random topology, runner and cut point."""
        pytest.importorskip("hypothesis")
        import hypothesis
        from hypothesis import strategies as st

        from zephon_core.ops.mapping import MapTransform
        from zephon_core.ops.shuffle import Shuffle

        examples = int(request.config.getoption("zephon_examples", 6) or 6)
        runners = ["inline", "threads"] + (["processes"] if subject.caps.processes else [])

        @hypothesis.settings(
            max_examples=examples,
            deadline=None,
            derandomize=True,
            database=None,
            phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],  # no slow shrinking
            suppress_health_check=list(hypothesis.HealthCheck),
        )
        @hypothesis.given(st.data())
        def check(data: Any) -> None:
            lanes = data.draw(st.sampled_from([1, 2, 4]), label="lanes")
            world = data.draw(st.sampled_from([w for w in (1, 2, 4) if lanes % w == 0]), label="world")
            world2 = data.draw(st.sampled_from([w for w in (1, 2, 4) if lanes % w == 0]), label="world after")
            flush_every = data.draw(st.sampled_from([1, 2, 3, 5]), label="flush_every")
            par = data.draw(st.integers(1, 3), label="parallelism")
            runner = data.draw(st.sampled_from(runners), label="runner")
            shuffle_before = data.draw(st.sampled_from([0, 4, 33]), label="shuffle before")
            shuffle_after = data.draw(st.sampled_from([0, 5, 64]), label="shuffle after")
            drop_before = data.draw(st.booleans(), label="filter before")
            before: list[Operator] = []
            if drop_before:
                before.append(MapTransform(samples.drop_some, parallelism=par))
            if shuffle_before:
                before.append(Shuffle(shuffle_before, seed=3))
            after = [Shuffle(shuffle_after, seed=4)] if shuffle_after else []

            def build(p: int) -> Pipeline:
                return subject.pipeline(p, before=[_clone(o) for o in before], after=[_clone(o) for o in after])

            ref = run_global(build, lanes=lanes, flush_every=flush_every, runner="inline").hashes
            hypothesis.assume(len(ref) >= 2)
            cut = data.draw(st.integers(1, len(ref) - 1), label="cut step")
            first = run_global(
                build, lanes=lanes, world_size=world, flush_every=flush_every, runner=runner, parallelism=par, steps=cut
            )
            rest = run_global(
                build,
                lanes=lanes,
                world_size=world2,
                flush_every=flush_every,
                runner=runner,
                parallelism=par,
                resume=first.state,
            )
            got = first.hashes + rest.hashes
            assert got == ref, (
                f"{rule(7)} a random pipeline differs from its uninterrupted inline run ({_first_difference(ref, got)})"
            )

        check()


def _clone(op: Operator) -> Operator:
    """A fresh copy of a built-in operator (each pipeline needs its own instances)."""
    import copy

    return copy.copy(op)
