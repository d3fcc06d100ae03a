"""The executor on its own: results, errors, crashes, start-up failures and clean shutdown."""

from __future__ import annotations

import os
import sys
import threading
import time
from concurrent.futures import wait

import psutil
import pytest
from zephon_ray import RayRunner, RayWorkerError
from zephon_ray import testing as ray_helpers

from zephon_core import ConfigError, OperatorError, WorkerCrashedError
from zephon_core.ops.contract import ItemFailure, apply_each

pytestmark = pytest.mark.usefixtures("ray_session")


def _wait_started(ex, n: int) -> None:
    deadline = time.monotonic() + 60
    while len(ex.pids) < n and time.monotonic() < deadline:  # actors start one by one on 2 cores
        time.sleep(0.05)


def _gone(pids: set[int], within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in pids):
            return True
        time.sleep(0.1)
    return False


def test_results_come_back_and_every_actor_works():
    ex = RayRunner().start(ray_helpers.pid_task, 3, "pids")
    try:
        _wait_started(ex, 3)
        futs = [ex.submit(i) for i in range(9)]
        done, _ = wait(futs, timeout=60)
        assert len(done) == 9
        pids = {f.result()[0] for f in futs}
        assert len(pids) == 3 and set(ex.pids.values()) == pids, "one actor per unit of parallelism, all used"
        assert os.getpid() not in pids
    finally:
        ex.close()
    assert _gone(pids), "close() must kill the actors"


def test_worker_exception_keeps_message_and_item_index():
    ex = RayRunner().start(lambda xs: apply_each(lambda x: 10 // x, xs), 1, "divide")
    try:
        assert ex.submit([1, 2, 5]).result(timeout=60) == [10, 5, 2]
        with pytest.raises(RayWorkerError) as info:
            ex.submit([1, 0, 2]).result(timeout=30)
        assert info.value.index == 1
        assert "ZeroDivisionError" in str(info.value)
        assert "ZeroDivisionError" in info.value.remote_traceback

        def boom(xs):
            raise KeyError("missing field 'text'")

        ex2 = RayRunner().start(boom, 1, "boom")
        try:
            with pytest.raises(RayWorkerError, match=r"KeyError: \"missing field 'text'\"") as info:
                ex2.submit([1]).result(timeout=60)
            assert info.value.index is None and info.value.type_name == "KeyError"
        finally:
            ex2.close()
        # the actor survives a worker exception and keeps serving
        assert ex.submit([10]).result(timeout=30) == [1]
    finally:
        ex.close()


def test_item_failure_raised_directly_keeps_its_index():
    def fn(xs):
        raise ItemFailure(3, "ValueError: bad sample")

    ex = RayRunner().start(fn, 1, "items")
    try:
        with pytest.raises(RayWorkerError) as info:
            ex.submit([0, 1, 2, 3]).result(timeout=60)
        assert info.value.index == 3 and str(info.value) == "ValueError: bad sample"
    finally:
        ex.close()


def test_unpicklable_worker_names_the_operator():
    lock = threading.Lock()

    def fn(xs):
        with lock:
            return xs

    with pytest.raises(ConfigError, match=r"operator 'tokenize'.*cannot be pickled for the ray runner.*lock"):
        RayRunner().start(fn, 2, "tokenize")


def test_lambdas_and_closures_work_through_cloudpickle():
    offset = 5
    ex = RayRunner().start(lambda xs: [x + offset for x in xs], 1, "closure")
    try:
        assert ex.submit([1, 2]).result(timeout=60) == [6, 7]
    finally:
        ex.close()


def test_a_task_that_kills_its_actors_fails_after_max_task_crashes():
    ex = RayRunner().start(ray_helpers.die_task, 1, "crashy")
    try:
        t0 = time.monotonic()
        first = ex.submit(1)
        with pytest.raises(
            WorkerCrashedError, match=r"a task of operator 'crashy' killed 2 Ray actors in a row \(pid \d+ on node"
        ):
            first.result(timeout=60)
        m = ex.metrics()
        assert m["actor_deaths"] == {"process died": 2} and m["retries"] == 1 and m["crash_failures"] == 1
        assert m["replacements"] >= 1, "each dead actor is replaced"
        assert time.monotonic() - t0 < 60
    finally:
        ex.close()


def test_max_task_crashes_is_configurable():
    ex = RayRunner(max_task_crashes=3).start(ray_helpers.die_task, 1, "crashy3")
    try:
        with pytest.raises(WorkerCrashedError, match=r"killed 3 Ray actors in a row.*max_task_crashes=3"):
            ex.submit(1).result(timeout=90)
        assert ex.metrics()["actor_deaths"] == {"process died": 3}
    finally:
        ex.close()


def test_actor_killed_from_outside_is_replaced_and_its_task_rerun():
    ex = RayRunner().start(ray_helpers.pid_task, 2, "victim")
    try:
        _wait_started(ex, 2)
        pids = {f.result(timeout=60)[0] for f in [ex.submit(i) for i in range(4)]}
        victim = next(iter(pids))
        futs = [ex.submit(i) for i in range(6)]
        time.sleep(0.05)
        os.kill(victim, 9)
        _, not_done = wait(futs, timeout=60)
        assert not not_done, "no task may hang after an actor dies"
        assert all(f.exception() is None for f in futs), [f.exception() for f in futs]
        m = ex.metrics()
        assert m["actor_deaths"] == {"process died": 1} and m["retries"] >= 1 and m["replacements"] == 1
        assert m["crash_failures"] == 0
        _wait_started(ex, 2)
        assert victim not in ex.pids.values() and len(ex.pids) == 2, "the lost actor is replaced"
    finally:
        ex.close()


def test_a_task_queued_behind_a_poison_task_is_not_blamed():
    """With two tasks per actor, the innocent task queued behind the one that kills it is re-run, not failed."""
    ex = RayRunner(tasks_per_actor=2).start(ray_helpers.die_on_odd, 1, "queued")
    try:
        _wait_started(ex, 1)
        poison, innocent = ex.submit([7]), ex.submit([8])
        with pytest.raises(WorkerCrashedError, match=r"killed 2 Ray actors"):
            poison.result(timeout=60)
        assert innocent.result(timeout=60) == [8]
    finally:
        ex.close()


def test_the_pool_grows_and_shrinks_on_resize():
    ex = RayRunner(max_parallelism=3).start(ray_helpers.pid_task, 1, "resized")
    try:
        _wait_started(ex, 1)
        ex.resize(5)  # capped at max_parallelism=3
        _wait_started(ex, 3)
        assert ex.metrics()["target"] == 3 and len(ex.pids) == 3
        ex.resize(1)
        deadline = time.monotonic() + 30
        while len(ex.pids) > 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(ex.pids) == 1 and ex.metrics()["actors"] == 1
        assert ex.submit(0).result(timeout=30)[0] in ex.pids.values()
    finally:
        ex.close()


def test_function_that_workers_cannot_import_is_a_config_error(tmp_path, monkeypatch):
    """A module only the driver can import (the test's subject: it is on the driver's path, not the workers')."""
    (tmp_path / "driver_only_module.py").write_text("def ident(xs):\n    return xs\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        import driver_only_module

        ex = RayRunner().start(driver_only_module.ident, 1, "local_code")
        try:
            with pytest.raises(
                ConfigError, match=r"operator 'local_code'.*cannot load the worker function.*runtime_env"
            ):
                ex.submit([1]).result(timeout=60)
        finally:
            ex.close()
    finally:
        sys.modules.pop("driver_only_module", None)


def test_actors_that_cannot_be_scheduled_fail_instead_of_hanging():
    runner = RayRunner(actor_options={"resources": {"no_such_accelerator": 1}}, start_timeout=1.5)
    ex = runner.start(ray_helpers.double, 2, "starved")
    try:
        t0 = time.monotonic()
        with pytest.raises(OperatorError, match=r"operator 'starved': 2 of 2 Ray actors did not start within 1.5 s"):
            ex.submit([1]).result(timeout=30)
        assert time.monotonic() - t0 < 10
    finally:
        ex.close()


def test_close_fails_waiting_tasks_and_rejects_new_ones():
    ex = RayRunner().start(ray_helpers.pid_task, 1, "closing")
    futs = [ex.submit(i) for i in range(5)]
    ex.close()
    wait(futs, timeout=10)
    assert all(f.done() for f in futs)
    with pytest.raises(RuntimeError, match="closed"):
        ex.submit(1)
    ex.close()  # idempotent


def test_two_tasks_per_actor_keeps_every_result_and_fails_poison_tasks():
    ex = RayRunner(tasks_per_actor=2).start(ray_helpers.pid_task, 2, "deep")
    try:
        _wait_started(ex, 2)
        futs = [ex.submit(i) for i in range(8)]
        assert len({f.result(timeout=60)[0] for f in futs}) == 2
    finally:
        ex.close()
    crashy = RayRunner(tasks_per_actor=2).start(ray_helpers.die_task, 1, "deep_crash")
    try:
        futs = [crashy.submit(i) for i in range(2)]
        wait(futs, timeout=90)
        assert all(isinstance(f.exception(), WorkerCrashedError) for f in futs)
    finally:
        crashy.close()
