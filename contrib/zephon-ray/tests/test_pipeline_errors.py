"""Failures inside Ray workers reach the training loop as clear errors, never as hangs."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import psutil
import pytest
from zephon_ray import testing as ray_helpers

from zephon_core import ConfigError, OperatorError, Pipeline, WorkerCrashedError

pytestmark = pytest.mark.usefixtures("ray_session")

SAMPLE_SEVEN = "nums[shard 0 (memory-00000), index 7]"


def test_worker_exception_names_operator_and_sample():
    p = (
        Pipeline(ray_helpers.numbers())
        .map_transform(ray_helpers.fail_on_seven, parallelism=2, runner="ray")
        .batch(4)
        .options(runner="threads")
    )
    t0 = time.monotonic()
    with p, pytest.raises(OperatorError) as info:
        list(p)
    msg = str(info.value)
    assert "operator 'fail_on_seven' (worker) failed" in msg
    assert "seven is not allowed" in msg and "ValueError" in msg
    assert SAMPLE_SEVEN in msg, "the ItemFailure index must narrow the error to the one failing sample"
    assert time.monotonic() - t0 < 60


def test_poison_record_is_a_worker_crashed_error_naming_operator_and_sample():
    p = (
        Pipeline(ray_helpers.numbers())
        .map_transform(ray_helpers.die_on_seven, parallelism=2, runner="ray")
        .batch(4)
        .options(runner="threads")
    )
    with p:
        it = iter(p)
        t0 = time.monotonic()
        with pytest.raises(WorkerCrashedError) as info:
            list(it)
        assert time.monotonic() - t0 < 60  # includes starting the actors and their replacements
    msg = str(info.value)
    # a crash cannot say which record killed the process: the task's samples are named (sample 7's chunk)
    assert "operator 'die_on_seven' (worker) failed" in msg and "samples nums[shard 0 (memory-00000), index 0]" in msg
    assert "killed 2 Ray actors in a row" in msg


def test_actor_killed_mid_run_is_replaced_and_the_run_is_unchanged(tmp_path):
    folder = tmp_path / "pids"
    folder.mkdir()
    p = (
        Pipeline(ray_helpers.numbers(3000, chunk_size=64))
        .map_transform(ray_helpers.PidRecorder(str(folder)), parallelism=2, runner="ray")
        .batch(8)
        .options(runner="threads", lanes=2)
    )
    with p:
        it = iter(p)
        got = [int(x) for x in next(it).data["i"]]
        victim = int(next(iter(Path(folder).iterdir())).name)
        psutil.Process(victim).kill()
        got += [int(x) for b in it for x in b.data["i"]]
        ray_stage = next(s for s in p.metrics()["stages"] if "executor" in s)["executor"]
    assert len(got) == len(set(got)) > 2900, "every record at most once (a partial last microbatch is left over)"
    assert ray_stage["actor_deaths"] == {"process died": 1} and ray_stage["replacements"] == 1
    threads = Pipeline(ray_helpers.numbers(3000, chunk_size=64)).map_transform(ray_helpers.add_one).batch(8)
    with threads.options(runner="threads", lanes=2) as t:
        assert got == [int(x) for b in t for x in b.data["i"]], "the same batches in the same order"


def test_unpicklable_worker_is_a_config_error_naming_the_operator():
    lock = threading.Lock()

    def locked(payload):
        with lock:
            return payload

    p = Pipeline(ray_helpers.numbers()).map_transform(locked).batch(4).options(runner="ray")
    with pytest.raises(ConfigError, match=r"operator 'locked'.*cannot be pickled for the ray runner"):
        iter(p)
    p.close()


def test_lambda_runs_on_ray():
    p = Pipeline(ray_helpers.numbers(64)).map_transform(lambda r: {"j": r["i"] * 3}, runner="ray").batch(8)
    with p.options(runner="threads") as run:
        got = [int(x) for b in run for x in b.data["j"]]
    assert got == [3 * i for i in range(64)]


def test_a_hung_ray_worker_times_out_and_close_returns_promptly():
    from zephon_core.errors import OperatorTimeoutError

    p = (
        Pipeline(ray_helpers.numbers())
        .map_transform(ray_helpers.hang_on_seven, parallelism=2, runner="ray", timeout_s=3)
        .batch(4)
        .options(runner="threads")
    )
    with pytest.raises(OperatorTimeoutError, match=r"'hang_on_seven' \(runner ray\).*timeout_s=3"):
        list(p)
    t0 = time.monotonic()
    p.close()
    assert time.monotonic() - t0 < 5
