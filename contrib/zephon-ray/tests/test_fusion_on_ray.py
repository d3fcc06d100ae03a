"""The Ray runner crosses processes, so the kernel fuses stateless steps there as on processes.

A fused task runs fetch and the maps in one actor call; the batches (hashed), lineage and
tombstones must be those of the threads runner, and a failing step must still be named.
"""

from __future__ import annotations

from typing import Any

import pytest
from zephon_ray import RayRunner
from zephon_ray import testing as ray_helpers

from zephon_core import OperatorError, Pipeline
from zephon_core.runtime.batch import BatchSpec
from zephon_core.runtime.diagnose import diagnose
from zephon_core.runtime.runners import crosses_processes


def _build(runner: str) -> Pipeline:
    p = Pipeline(ray_helpers.numbers()).map_transform(ray_helpers.add_one, parallelism=2)
    return p.map_transform(ray_helpers.drop_fives).batch(4).options(runner=runner, lanes=2)


def _run(p: Pipeline) -> tuple[list[tuple[str, Any, Any]], list[tuple[str, str, int]]]:
    with p:
        out = [(b.sha256(), b.lineage, b.dropped) for b in p]
        stages = [(s["name"], s["runner"], s["parallelism"]) for s in p.metrics()["stages"]]
    return out, stages


def test_the_ray_runner_declares_it_crosses_processes():
    assert crosses_processes(RayRunner())
    assert BatchSpec(4).default_runner("ray") == "threads"  # the default collation stays in the training process


def test_diagnose_on_ray_asks_for_more_workers_not_another_runner():
    stage = {"name": "decode", "runner": "ray", "parallelism": 2, "worker_busy": 0.95, "accumulator_busy": 0.1}
    window = {"consumer": {"wait": 0.8}, "stages": [{**stage, "input_wait": 0.0}]}
    assert "the machine's cores are the limit" in diagnose(window).suggestion


@pytest.mark.slow
@pytest.mark.usefixtures("ray_session")
def test_ray_fuses_pass_through_steps_with_the_threads_hashes():
    fused, stages = _run(_build("ray"))
    threads, _ = _run(_build("threads"))
    assert stages == [("fetch+add_one+drop_fives", "ray", 2), ("batch", "threads", 1)]
    assert fused == threads
    assert any(d for _, _, d in fused)  # the map's tombstones were rebuilt from the fused task


@pytest.mark.slow
@pytest.mark.usefixtures("ray_session")
def test_a_failing_fused_step_on_ray_is_named_with_its_sample():
    p = Pipeline(ray_helpers.numbers()).map_transform(ray_helpers.add_one).map_transform(ray_helpers.fail_on_seven)
    with p.batch(4).options(runner="ray"), pytest.raises(OperatorError) as info:
        list(p)
    msg = str(info.value)
    assert "operator 'fail_on_seven' (worker, fused into 'fetch+add_one+fail_on_seven')" in msg
    assert "nums[shard 0 (memory-00000), index 7]" in msg
