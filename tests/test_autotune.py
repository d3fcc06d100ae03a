"""Online autotuning changes parallelism while running and never changes a batch."""

from __future__ import annotations

import time

import pytest

from tests import helpers
from zephon_core import Dataset, Pipeline, StaticMixtureWorkSource, merge_checkpoints
from zephon_core.conformance.harness import run_global
from zephon_core.hashing import hash_global_batch

LANES = 2


def _build(par: int = 1) -> Pipeline:
    ds = Dataset.from_records("d", [{"i": i} for i in range(3000)], shard_size=250)
    ws = StaticMixtureWorkSource([ds], chunk_size=32, seed=4)
    return (
        Pipeline(ws)
        .map_transform(helpers.sleepy, parallelism=par, name="slow")  # sleeps 2 ms: more threads help
        .shuffle(64, seed=1)
        .batch(8)
    )


def _tuned_hashes(
    state: dict | None = None, steps: int | None = None, world: int = 1, runner: str = "threads"
) -> tuple[list[str], dict, list]:
    hashes, states, reports = [], [], []
    per = LANES // world
    for rank in range(world):
        p = _build().options(
            lanes=LANES, dp_rank=rank, dp_world_size=world, autotune=True, cpu_budget=6, runner=runner
        )
        got = []
        with p:
            if state is not None:
                p.load_state_dict(state)
            for b in p:
                got.append(b)
                if p._engine is not None and p._engine.tuner is not None:
                    p._engine.tuner.interval_s = 0.3
                if steps is not None and len(got) >= steps * per:
                    break
            states.append(p.state_dict())
            reports.append(p.metrics()["autotune"])
        hashes.append(got)
    n = min(len(g) // per for g in hashes)
    out = [hash_global_batch([b for g in hashes for b in g[t * per : (t + 1) * per]]) for t in range(n)]
    return out, merge_checkpoints(states) if steps is not None else {}, reports


@pytest.mark.slow
def test_autotune_changes_parallelism_and_not_the_data():
    fixed = run_global(_build, lanes=LANES, world_size=1, runner="threads", parallelism=3).hashes
    t0 = time.monotonic()
    tuned, _, reports = _tuned_hashes()
    assert tuned == fixed
    changes = reports[0]["changes"]
    assert changes, f"the tuner made no change in {time.monotonic() - t0:.1f} s"
    assert reports[0]["parallelism"]["slow"] > 1


@pytest.mark.slow
def test_a_checkpoint_taken_while_tuning_resumes_exactly_on_another_world_size():
    fixed = run_global(_build, lanes=LANES, world_size=1, runner="threads", parallelism=2).hashes
    head, state, _ = _tuned_hashes(steps=60)
    tail, _, _ = _tuned_hashes(state=state, world=2)
    assert head + tail == fixed


@pytest.mark.slow
def test_autotune_resizes_process_pools_and_not_the_data():
    fixed = run_global(_build, lanes=LANES, world_size=1, runner="threads", parallelism=1).hashes
    tuned, _, reports = _tuned_hashes(runner="processes")
    assert tuned == fixed
    assert reports[0]["parallelism"]["fetch+slow"] > 1, reports[0]  # the map runs fused with fetch
