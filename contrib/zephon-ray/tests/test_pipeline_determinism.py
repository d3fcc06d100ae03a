"""Global batches on Ray are byte-identical to the threads runner, across world sizes and resumes.

The pipeline is the kernel's demo: a filtering map (drops short documents), a stateful n-to-m
``stateful_transform`` (concatenate and cut rows of 128 tokens), a shuffle and a batch, over real
text, 4 lanes, a flush sentinel every 2 chunks. With ``runner="ray"`` every worker (fetch, map,
row assembly, collate) runs in Ray actors.
"""

from __future__ import annotations

import functools

import pytest

from zephon_core.conformance.harness import run_global
from zephon_core.demo import build, make_source
from zephon_core.pipeline import Pipeline

pytestmark = pytest.mark.usefixtures("ray_session")

LANES = 4
FLUSH = 2


@functools.lru_cache(maxsize=1)
def _source():
    return make_source(chunk_size=32)


def _build(parallelism: int) -> Pipeline:
    return build(parallelism, source=_source())


@pytest.fixture(scope="module")
def threads_hashes() -> list[str]:
    hashes = run_global(_build, lanes=LANES, flush_every=FLUSH, runner="threads", parallelism=2).hashes
    assert len(hashes) > 40
    return hashes


def _first_difference(a: list[str], b: list[str]) -> str:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"first difference at global step {i}"
    return f"{len(a)} and {len(b)} steps"


def test_ray_equals_threads_on_one_rank(threads_hashes):
    got = run_global(_build, lanes=LANES, world_size=1, flush_every=FLUSH, runner="ray", parallelism=2).hashes
    assert got == threads_hashes, _first_difference(threads_hashes, got)


@pytest.fixture(scope="module")
def two_rank_checkpoint(threads_hashes):
    """Global steps before the cut on 2 ranks (every worker on Ray), and the merged checkpoint."""
    cut = len(threads_hashes) // 3
    first = run_global(_build, lanes=LANES, world_size=2, flush_every=FLUSH, runner="ray", steps=cut)
    assert first.hashes == threads_hashes[:cut], _first_difference(threads_hashes[:cut], first.hashes)
    return first


@pytest.mark.slow
def test_checkpoint_on_two_ranks_resumes_on_four(threads_hashes, two_rank_checkpoint):
    """World sizes 2 then 4 on Ray: together they must give the threads run's global batches."""
    rest = run_global(
        _build, lanes=LANES, world_size=4, flush_every=FLUSH, runner="ray", resume=two_rank_checkpoint.state
    )
    got = two_rank_checkpoint.hashes + rest.hashes
    assert got == threads_hashes, _first_difference(threads_hashes, got)


def test_checkpoint_on_two_ranks_resumes_on_one_with_threads_and_ray(threads_hashes, two_rank_checkpoint):
    """A checkpoint does not record the runner: the Ray run's state resumes on threads and on Ray."""
    for runner in ("threads", "ray"):
        rest = run_global(
            _build, lanes=LANES, world_size=1, flush_every=FLUSH, runner=runner, resume=two_rank_checkpoint.state
        )
        got = two_rank_checkpoint.hashes + rest.hashes
        assert got == threads_hashes, f"resumed on {runner}: {_first_difference(threads_hashes, got)}"


def _mixed(parallelism: int) -> Pipeline:
    """Only the expensive operators on Ray; fetch, shuffle and batch stay on threads."""
    from zephon_core.demo import concat_flush, concat_init, concat_push, concat_transform, to_bytes

    return (
        Pipeline(_source())
        .map_transform(to_bytes, parallelism=2, runner="ray")
        .stateful_transform(
            "concat_rows",
            init_state=concat_init,
            push=concat_push,
            flush=concat_flush,
            transform=concat_transform,
            parallelism=parallelism,
            runner="threads",
        )
        .shuffle(buffer_size=64, seed=7)
        .batch(microbatch_size=8)
    )


def test_per_operator_ray_mixed_with_threads(threads_hashes):
    got = run_global(_mixed, lanes=LANES, world_size=1, flush_every=FLUSH, runner="threads", parallelism=2).hashes
    assert got == threads_hashes, _first_difference(threads_hashes, got)
    p = _mixed(2).options(lanes=LANES, runner="threads")
    assert [op.runner for op in p.operators] == [None, "ray", "threads", None, None]
    p.close()
