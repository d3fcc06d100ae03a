"""The determinism matrix: identical global batches across every knob the promise names.

Pipeline: a filtering map (byte tokens), a stateful n-to-m operator (concatenate and cut rows of
fixed length, written with ``stateful_transform``), ``shuffle`` and ``batch``, over two datasets mixed
3:1. Every run is compared, global step by global step, with the uninterrupted single-rank inline
baseline by SHA-256.
"""

from __future__ import annotations

import functools
import itertools

import pytest

from zephon_core.conformance.harness import run_global
from zephon_core.demo import build
from zephon_core.hashing import hash_arrays

LANES = 4
K = 2


@pytest.fixture(scope="module")
def builder(demo_source):
    return functools.partial(_build, source=demo_source)


def _build(parallelism: int, *, source):
    return build(parallelism, source=source)


@pytest.fixture(scope="module")
def baseline(builder):
    res = run_global(builder, lanes=LANES, world_size=1, runner="inline", flush_every=K, keep_batches=True)
    assert len(res.hashes) > 40, "the test corpus should give many global steps"
    return res


@pytest.mark.parametrize(
    ("runner", "parallelism", "world_size"),
    [
        (r, p, w)
        for r, p, w in itertools.product(["inline", "threads", "processes"], [1, 4], [1, 2, 4])
        if (r, p, w) != ("inline", 1, 1)
    ],
)
def test_same_global_batches(builder, baseline, runner, parallelism, world_size):
    res = run_global(builder, lanes=LANES, world_size=world_size, runner=runner, parallelism=parallelism, flush_every=K)
    assert res.hashes == baseline.hashes


def _resume_points(baseline):
    """Per global step t (1-based), the (window, skip) of every lane after t steps."""
    lanes = baseline.batches[0]
    steps = len(baseline.hashes)
    return {t: [lanes[(t - 1) * LANES + i].resume for i in range(LANES)] for t in range(1, steps + 1)}


def _interesting_cuts(baseline):
    """Five or more cut steps covering: the first step, right after a flush sentinel (a lane's last
    delivered record closed its window), mid-window in a later window, and late in the run."""
    points = _resume_points(baseline)
    after_sentinel = [
        t
        for t in range(1, len(points))
        if any(points[t + 1][i].window > points[t][i].window and points[t + 1][i].skip == 8 for i in range(LANES))
    ]
    assert after_sentinel, "the corpus must contain a microbatch that ends exactly at a window boundary"
    later_window = next(t for t, rps in points.items() if all(r.window >= 2 for r in rps))
    n = len(points)
    return sorted({1, after_sentinel[0], later_window, n // 2 + 1, n - 3})


@pytest.mark.slow
@pytest.mark.parametrize(("before", "after"), [(2, 4), (4, 1), (1, 2)])
def test_resume_with_world_size_change(builder, baseline, before, after):
    cuts = _interesting_cuts(baseline)
    assert len(cuts) >= 5
    for cut in cuts:
        first = run_global(
            builder, lanes=LANES, world_size=before, runner="threads", parallelism=2, flush_every=K, steps=cut
        )
        assert first.hashes == baseline.hashes[:cut]
        rest = run_global(
            builder, lanes=LANES, world_size=after, runner="threads", parallelism=3, flush_every=K, resume=first.state
        )
        assert first.hashes + rest.hashes == baseline.hashes, f"cut at step {cut}, {before}->{after} ranks"


@pytest.mark.slow
def test_resume_mid_round_single_rank(builder):
    """A checkpoint after any microbatch (not only at global-step boundaries) resumes exactly."""
    with builder(2).options(lanes=LANES, flush_every_k_chunks=K) as p:
        full = [hash_arrays(b.to_training()) + str(b.lane) for b in p]
    for cut in (1, 3, 6, 29, 75):
        with builder(2).options(lanes=LANES, flush_every_k_chunks=K, runner="inline") as p:
            head = [hash_arrays(b.to_training()) + str(b.lane) for b in itertools.islice(p, cut)]
            state = p.state_dict()
        with builder(1).options(lanes=LANES, flush_every_k_chunks=K, runner="processes") as p:
            p.load_state_dict(state)
            tail = [hash_arrays(b.to_training()) + str(b.lane) for b in p]
        assert head + tail == full, f"cut after microbatch {cut}"


def test_repeated_resume_cycles(builder, baseline):
    """Checkpoint and resume many times in one run, changing world size each time."""
    hashes: list[str] = []
    state = None
    for world, steps in [(1, 3), (4, 5), (2, 7), (4, 2), (1, 9), (2, None)]:
        res = run_global(
            builder, lanes=LANES, world_size=world, runner="threads", flush_every=K, resume=state, steps=steps
        )
        hashes += res.hashes
        state = res.state
    assert hashes == baseline.hashes
