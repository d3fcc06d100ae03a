"""Operator conformance rules 1 to 3: the worker is a pure function, state is per lane and plain data,
randomness comes from the data.

Part of :class:`~zephon_core.conformance.operators.OperatorConformance`, which is what a plugin subclasses.
"""

from __future__ import annotations

import json
import os
import pickle
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from zephon_core.conformance.driver import FLUSH, Driver, Output, split
from zephon_core.conformance.operator_subject import CHUNK, LANES, Subject, _first_difference, _run
from zephon_core.conformance.rules import rule
from zephon_core.ops.contract import Records


class IsolationChecks:
    """The checks of rules 1 to 3 (see the module docstring)."""

    __test__ = False  # collected through OperatorConformance's subclasses only

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
