"""The announced text pipeline is elastically deterministic on real text.

``Pipeline(ws).tokenize(tokenizer_id="gpt2", parallelism=N).pack_sequences(target_length=2048)
.ensure_mixture().batch(microbatch_size=8)`` over two datasets of English text mixed 60:40 in tokens,
with 4 lanes. The runner under test runs ``tokenize`` and ``pack_sequences`` (fetch and batch stay
on threads: the kernel's own determinism matrix varies those). Every run is compared, global step by global step (SHA-256 of each global batch's
training arrays), with the uninterrupted single-rank inline baseline: across parallelism, runners
and world sizes, and across checkpoint/resume on a different world size, cut mid-window so that
the packing, mixing and batching state at the cut must be rebuilt by replay.
"""

from __future__ import annotations

import functools
import itertools

import pytest

from zephon_core import Pipeline, StaticMixtureWorkSource
from zephon_core.conformance.harness import run_global
from zephon_core.testing.corpus import english_and_technical

pytest.importorskip("zephon_pack")

LANES = 4
K = 4  # flush every 4 chunks of 64 documents: several windows per global step
STEPS = 6
QUICK = {("threads", 3, 2), (2, 4, 3, "threads")}
"""The cases ``-m "not slow"`` keeps (a few seconds each on real text): one runner, parallelism and world
size, and one resume cut mid-window onto more ranks. A plain run runs every case."""


def build(parallelism: int, *, source: StaticMixtureWorkSource | None) -> Pipeline:
    ws = source if source is not None else english_and_technical()  # None: every rank calibrates its own source
    return (
        Pipeline(ws)
        .fetch(runner="threads")  # the kernel's own stages are covered by the kernel's matrix
        .tokenize(tokenizer_id="gpt2", parallelism=parallelism)
        .pack_sequences(target_length=2048, parallelism=parallelism)
        .ensure_mixture()
        .batch(microbatch_size=8, runner="threads")
    )


@pytest.fixture(scope="module")
def shared():
    return functools.partial(build, source=english_and_technical())


@pytest.fixture(scope="module")
def baseline(shared):
    res = run_global(shared, lanes=LANES, world_size=1, runner="inline", flush_every=K, steps=STEPS)
    assert len(res.hashes) == STEPS and len(set(res.hashes)) == STEPS
    return res


@pytest.mark.parametrize(
    ("runner", "parallelism", "world_size"),
    [
        pytest.param(r, p, w, marks=[] if (r, p, w) in QUICK else [pytest.mark.slow])
        for r, p, w in itertools.product(["inline", "threads", "processes"], [1, 3], [1, 2, 4])
        if (r, p, w) != ("inline", 1, 1)
    ],
)
def test_same_global_batches(shared, baseline, runner, parallelism, world_size):
    res = run_global(
        shared, lanes=LANES, world_size=world_size, runner=runner, parallelism=parallelism, flush_every=K, steps=STEPS
    )
    assert res.hashes == baseline.hashes


@pytest.mark.slow
def test_every_rank_calibrating_its_own_source_agrees(baseline):
    fresh = functools.partial(build, source=None)
    res = run_global(fresh, lanes=LANES, world_size=2, runner="threads", parallelism=2, flush_every=K, steps=STEPS)
    assert res.hashes == baseline.hashes


@pytest.mark.parametrize(
    ("before", "after", "cut", "runner"),
    [
        pytest.param(*case, marks=[] if case in QUICK else [pytest.mark.slow])
        for case in [
            (2, 4, 1, "threads"),
            (2, 4, 3, "threads"),
            (2, 4, 5, "inline"),
            (4, 1, 2, "threads"),
            (4, 1, 4, "threads"),
            (4, 2, 3, "processes"),
        ]
    ],
)
def test_resume_on_another_world_size(shared, baseline, before, after, cut, runner):
    first = run_global(shared, lanes=LANES, world_size=before, runner=runner, parallelism=2, flush_every=K, steps=cut)
    assert first.hashes == baseline.hashes[:cut]
    state = first.state
    assert state is not None
    # the cut is inside a window on some lane: replay has to rebuild partly packed rows
    assert any(ls["skip"] > 0 for ls in state["lanes"].values())
    assert state["calibration"]["tokens_per_sample"], "the token estimates travel in the checkpoint"
    second = run_global(
        shared,
        lanes=LANES,
        world_size=after,
        runner=runner,
        parallelism=3,
        flush_every=K,
        resume=state,
        steps=STEPS - cut,
    )
    assert first.hashes + second.hashes == baseline.hashes


@pytest.mark.slow
def test_resume_twice(shared, baseline):
    a = run_global(shared, lanes=LANES, world_size=4, runner="threads", flush_every=K, steps=2)
    b = run_global(shared, lanes=LANES, world_size=2, runner="threads", flush_every=K, resume=a.state, steps=2)
    c = run_global(shared, lanes=LANES, world_size=1, runner="threads", flush_every=K, resume=b.state, steps=STEPS - 4)
    assert a.hashes + b.hashes + c.hashes == baseline.hashes
