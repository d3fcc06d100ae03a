"""Operator conformance rule 7: resuming from a checkpoint equals the uninterrupted run, on any world size,
in random pipelines around the operator.

Part of :class:`~zephon_core.conformance.operators.OperatorConformance`, which is what a plugin subclasses.
"""

from __future__ import annotations

from typing import Any

import pytest

from zephon_core.conformance import samples
from zephon_core.conformance.harness import run_global
from zephon_core.conformance.operator_subject import CHUNK, FLUSH_EVERY, LANES, Subject, _clone, _first_difference
from zephon_core.conformance.rules import rule
from zephon_core.ops.contract import Operator
from zephon_core.pipeline import Pipeline


class ResumeChecks:
    """The checks of rule 7 (see the module docstring)."""

    __test__ = False  # collected through OperatorConformance's subclasses only

    # -- rule 7: resume equals the uninterrupted run ----------------------------------------------
    @pytest.mark.slow
    def test_resume_from_every_cut_point(self, subject: Subject, baseline: list[str]) -> None:
        lanes = 2
        full = run_global(subject.builder(), lanes=lanes, flush_every=FLUSH_EVERY, runner="inline")
        window = CHUNK * FLUSH_EVERY  # global steps per window when one record makes one row
        cuts = [c for c in [*range(1, window + 1), *range(window + 1, 2 * window + 1, 4)] if c < len(full.hashes)]
        # One more inline pass checkpoints after every cut step (each a deep copy, as if saved): the
        # same states as runs stopped at each cut, without replaying every prefix.
        cut_run = run_global(subject.builder(), lanes=lanes, flush_every=FLUSH_EVERY, runner="inline", snapshots=cuts)
        assert cut_run.hashes == full.hashes, (
            f"{rule(7)} taking checkpoints during a run changes its batches ({_first_difference(full.hashes, cut_run.hashes)})"
        )
        for cut in cuts:
            rest = run_global(
                subject.builder(), lanes=lanes, flush_every=FLUSH_EVERY, runner="threads", resume=cut_run.snapshots[cut]
            )
            got = full.hashes[:cut] + rest.hashes
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

        from zephon_core.defaults.operators.mapping import MapTransform
        from zephon_core.defaults.operators.shuffle import Shuffle

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
