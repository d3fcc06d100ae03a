"""The operator conformance suite's runner checks, run with ``runner="ray"``.

The suite checks runners by comparing global-batch hashes of real pipelines against an inline
baseline. Its own runner tests are parametrised over threads and processes, so this subclass adds
the same checks for Ray, using the suite's fixtures (``subject``, ``baseline``), its pipeline
harness and its rule tags. The suite's other checks do not depend on the runner; the kernel runs
them for its built-in operators, so they are skipped here instead of run twice.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest

from zephon_core.conformance import OperatorConformance
from zephon_core.conformance.harness import run_global
from zephon_core.conformance.operators import FLUSH_EVERY, LANES
from zephon_core.conformance.rules import rule
from zephon_core.conformance.samples import upper_or_drop, words_flush, words_init, words_push, words_transform
from zephon_core.defaults.operators.mapping import MapTransform
from zephon_core.defaults.operators.stateful import StatefulTransform

_RUNNER_INDEPENDENT = "runner-independent check: the kernel's own conformance tests run it for built-in operators"


def _skip(self: Any) -> None:
    pytest.skip(_RUNNER_INDEPENDENT)


def _skip_resume(self: Any) -> None:
    pytest.skip("resume on Ray is checked with the n-to-m operator below, where replay rebuilds state")


def _differs(a: list[str], b: list[str]) -> str:
    at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
    return f"first difference at global step {at}" if at is not None else f"lengths {len(a)} and {len(b)}"


@pytest.mark.usefixtures("ray_session")
class RayRunnerChecks(OperatorConformance):
    """The suite's runner, parallelism, world-size and resume checks with every worker on Ray."""

    __test__ = False

    test_lane_purity = _skip
    test_state_and_config_are_json = _skip
    test_no_dependence_on_global_random_state = _skip
    test_fresh_interpreters_agree = _skip
    test_flush_resets_lane = _skip
    test_lineage_is_conserved = _skip
    test_grouping_does_not_change_output = _skip
    test_resume_from_every_cut_point = _skip
    test_resume_on_another_world_size = _skip
    test_differential_random_pipelines = _skip
    test_world_size_does_not_change_global_batches = _skip  # world sizes on Ray: test_pipeline_determinism
    test_parallelism_does_not_change_output = _skip

    def _ray(self, subject: Any, **kw: Any) -> list[str]:
        kw.setdefault("lanes", LANES)
        kw.setdefault("flush_every", FLUSH_EVERY)
        return run_global(subject.builder(), runner="ray", **kw).hashes

    def test_ray_runner_does_not_change_output(self, subject, baseline):
        got = self._ray(subject, parallelism=2)
        assert got == baseline, (
            f"{rule(1)} global batches differ between the inline and ray runners ({_differs(baseline, got)}): "
            "the worker depends on its process, module state or timing"
        )

    def test_ray_resume_on_another_world_size(self, subject, baseline):
        cut = len(baseline) // 3
        first = run_global(
            subject.builder(), lanes=LANES, world_size=2, flush_every=FLUSH_EVERY, runner="ray", steps=cut
        )
        rest = run_global(
            subject.builder(), lanes=LANES, world_size=1, flush_every=FLUSH_EVERY, runner="ray", resume=first.state
        )
        got = first.hashes + rest.hashes
        assert got == baseline, (
            f"{rule(7)} checkpoint at step {cut} on 2 ranks, resumed on 1, on the ray runner: "
            f"global batches differ ({_differs(baseline, got)})"
        )


class TestMapTransformOnRay(RayRunnerChecks):
    """A filtering map: 1-to-1 with tombstones (its resume is the kernel's; here only the runner check)."""

    test_ray_resume_on_another_world_size = _skip_resume

    @pytest.fixture
    def operator_factory(self):
        return functools.partial(MapTransform, upper_or_drop)


class TestStatefulTransformOnRay(RayRunnerChecks):
    """A stateful n-to-m operator: words concatenated across documents, rows of 32 words."""

    @pytest.fixture
    def operator_factory(self):
        return functools.partial(
            StatefulTransform,
            "word_rows",
            init_state=words_init,
            push=words_push,
            flush=words_flush,
            transform=words_transform,
        )
