"""A real multi-node Ray cluster: a node lost mid-run, a node joining, a poison record, a resume.

The cluster (``conftest.LocalCluster``) is a head and worker raylets on this machine, each with its
own node id and resources: the heavy operator asks for the ``heavy`` resource that only worker
nodes offer, one actor per node. Global batches are compared by SHA-256 with a threads run, so a
re-run task, a replaced actor or a pool that grows or shrinks must change nothing. Every wait is
bounded and says what it waited for.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from zephon_ray import ray_runner_plugin
from zephon_ray import testing as ray_helpers

from zephon_core import Pipeline, WorkerCrashedError
from zephon_core.conformance.harness import run_global
from zephon_core.hashing import hash_global_batch
from zephon_core.plugins import ZephonPluginManager

pytestmark = pytest.mark.slow

LANES = 2
RECORDS = 2400
SAMPLE_CHUNK = "samples nums[shard 0 (memory-00000), index 0], nums[shard 0 (memory-00000), index 1]"
PLUGINS = ZephonPluginManager(
    plugins=[ray_runner_plugin("ray_heavy", actor_options={"num_cpus": 1, "resources": {"heavy": 1}}, start_timeout=90)]
)


def _build(runner: str, fn: Callable[[dict[str, Any]], Any] = ray_helpers.slow_add_one, n: int = RECORDS) -> Pipeline:
    """The heavy map on ``runner`` (three actors wanted), everything else on threads."""
    return (
        Pipeline(ray_helpers.numbers(n, chunk_size=16), plugins=PLUGINS)
        .map_transform(fn, parallelism=3, runner=runner, name="heavy")
        .batch(microbatch_size=8)
    )


def _until(what: str, cond: Callable[[], bool], timeout: float = 60.0) -> None:
    """Wait for ``cond`` at most ``timeout`` seconds; fail naming ``what`` otherwise."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.05)


def _pool(p: Pipeline) -> dict[str, Any]:
    """The heavy stage's executor figures from ``pipeline.metrics()``."""
    stage = next(s for s in p.metrics()["stages"] if s["name"] == "heavy")
    return dict(stage["executor"])


def _hashes(batches: list[Any]) -> list[str]:
    return [hash_global_batch(batches[t : t + LANES]) for t in range(0, len(batches) - LANES + 1, LANES)]


@pytest.fixture(scope="module")
def threads_hashes() -> list[str]:
    got = run_global(lambda _: _build("threads"), lanes=LANES, runner="threads").hashes
    assert len(got) == RECORDS // 8 // LANES
    return got


def test_node_joins_node_lost_checkpoint_while_down_resumes_on_two_ranks(ray_cluster, threads_hashes):
    p = _build("ray_heavy").options(lanes=LANES, runner="threads")
    batches: list[Any] = []
    remover: threading.Thread | None = None
    state: dict[str, Any] | None = None
    checkpoint_step = -1
    with p:
        it = iter(p)
        for batch in it:
            batches.append(batch)
            step, boundary = len(batches) // LANES, len(batches) % LANES == 0
            if boundary and step == 10:
                _until("two actors on the two worker nodes", lambda: _pool(p)["actors"] == 2)
                assert _pool(p)["starting"] == 1, "the third actor waits for room instead of failing"
                ray_cluster.add_worker()
                _until("the third actor to start on the node that joined", lambda: _pool(p)["actors"] == 3)
                assert _pool(p)["nodes"] == 3, "one heavy actor per worker node, none on the head"
            elif boundary and step == 25:
                victim = ray_cluster.workers[0]
                remover = threading.Thread(target=ray_cluster.remove_worker, args=(victim,))
                remover.start()  # while the loop keeps taking batches, so the victim is busy
            elif boundary and remover is not None and state is None and not remover.is_alive():
                pool = _pool(p)
                # "node lost" when Ray declared the node dead first, "process died" when the actor's
                # process was seen to exit first (both happen when a raylet is killed)
                if sum(pool["actor_deaths"].values()) >= 1:
                    assert pool["starting"] == 1, "the lost actor's replacement waits for a node with room"
                    state, checkpoint_step = p.state_dict(), step  # taken while the node is down
        pool = _pool(p)
    if remover is not None:
        remover.join(timeout=60)
    assert state is not None, f"the node loss was not noticed before the run ended (pool: {pool})"
    assert pool["peak_actors"] == 3 and pool["retries"] >= 1 and pool["replacements"] >= 1, pool
    got = _hashes(batches)
    assert got == threads_hashes, "a global batch differs from the threads run after a node joined and left"

    resumed = run_global(lambda _: _build("ray_heavy"), lanes=LANES, world_size=2, runner="threads", resume=state)
    assert resumed.hashes == threads_hashes[checkpoint_step:], "resuming on 2 ranks changed a global batch"


def test_poison_record_fails_after_two_actor_deaths_naming_operator_and_sample(ray_cluster):
    p = _build("ray_heavy", fn=ray_helpers.die_on_seven, n=64).options(lanes=1, runner="threads")
    t0 = time.monotonic()
    with p, pytest.raises(WorkerCrashedError) as info:
        list(p)
    msg = str(info.value)
    # a crash cannot say which record killed the process: the samples of its task (sample 7's chunk)
    assert "operator 'heavy' (worker) failed" in msg and SAMPLE_CHUNK in msg
    assert "killed 2 Ray actors in a row" in msg and msg.count(" on node ") == 2
    assert time.monotonic() - t0 < 60, "a poison record must be an error within seconds, not a hang"


def test_vanished_node_is_noticed_by_the_health_check_and_its_task_rerun(ray_cluster, threads_hashes):
    """A frozen node closes no connection: only the health check (1 s, 2 s timeout, x 5) declares it dead."""
    p = _build("ray_heavy").options(lanes=LANES, runner="threads")
    batches: list[Any] = []
    victim: Any = None
    frozen: list[Any] = []
    last = [time.monotonic()]
    stalled = threading.Event()
    done = threading.Event()

    def watchdog() -> None:  # a pool that never notices would wait for Ray's RPC timeout: bound it
        while not done.wait(0.5):
            if frozen and time.monotonic() - last[0] > 45:
                stalled.set()
                ray_cluster.bury_worker(victim, frozen)  # connections close: the pipeline goes on
                return

    guard = threading.Thread(target=watchdog, daemon=True)
    gap = 0.0
    try:
        with p:
            for batch in p:
                now = time.monotonic()
                if frozen:
                    gap = max(gap, now - last[0])
                last[0] = now
                batches.append(batch)
                if victim is None and len(batches) == 10 * LANES:
                    _until("two actors on the two worker nodes", lambda: _pool(p)["actors"] == 2)
                    victim = ray_cluster.workers[0]
                    frozen.extend(ray_cluster.freeze_worker(victim))
                    last[0] = time.monotonic()
                    guard.start()
            pool = _pool(p)
    finally:
        done.set()
        if guard.is_alive():
            guard.join(timeout=60)
        if victim is not None:
            ray_cluster.bury_worker(victim, frozen)
    assert not stalled.is_set(), f"no batch for 45 s after a node vanished: its death was not noticed (pool: {pool})"
    assert gap < 35, f"a vanished node stalled the run for {gap:.1f} s (health check about 15 s)"
    assert pool["actor_deaths"].get("node lost", 0) >= 1 and pool["retries"] >= 1, pool
    assert _hashes(batches) == threads_hashes, "a global batch differs from the threads run after a node vanished"
