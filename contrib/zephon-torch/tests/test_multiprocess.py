"""Real ranks: separate processes joined by torch.distributed (gloo on CPU), 4 lanes.

The reference is the kernel's single-process harness (``run_global``), which defines what a
global batch is. Every real run, on 1, 2 or 4 ranks, from scratch or resumed from a checkpoint
taken on 2 ranks (as JSON gathered by ``save_checkpoint`` and through
``torch.distributed.checkpoint``), must produce the same SHA-256 for every global batch, and
every rank must stop at the same global step even though their lanes run dry at different steps.
"""

from __future__ import annotations

import pytest
import torch.distributed as dist
from zephon_torch.testing.ranks import check_ok, launch
from zephon_torch.testing.text import LANES, MICROBATCH, build

from zephon_core.conformance.harness import run_global

pytestmark = [
    pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(), reason="needs gloo"),
    pytest.mark.slow,  # real torch.distributed ranks: a process start and a gloo rendezvous per rank
]

CUT = 10  # the 2-rank run checkpoints after this many global steps


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("ranks")


@pytest.fixture(scope="module")
def reference() -> list[str]:
    hashes = run_global(build, lanes=LANES, world_size=1, runner="threads").hashes
    assert len(hashes) > CUT + 10 and len(set(hashes)) == len(hashes)
    return hashes


@pytest.fixture(scope="module")
def two_ranks(work):
    runs = [
        {
            "name": "full",
            "save_at": [CUT],
            "save_json": str(work / "ckpt-{step}.json"),
            "save_dcp": str(work / "dcp-{step}"),
        },
        {"name": "accumulate", "global_batch_size": 2 * LANES * MICROBATCH},
    ]
    results = launch(2, runs, work)
    check_ok(results)
    return results


@pytest.fixture(scope="module", params=[1, pytest.param(4, marks=pytest.mark.slow)])
def other_world(request, work, two_ranks):
    """A run on another number of ranks: from scratch, and resumed from the 2-rank checkpoints."""
    runs = [
        {"name": "full"},
        {"name": "from_json", "load": {"json": str(work / f"ckpt-{CUT}.json")}},
        {"name": "from_dcp", "load": {"dcp": str(work / f"dcp-{CUT}")}},
        {"name": "accumulate", "global_batch_size": 2 * LANES * MICROBATCH},
    ]
    if request.param == 4:
        runs.append({"name": "mesh", "mesh": [2, 2]})  # 2 data-parallel replicas x 2 tensor-parallel ranks
    results = launch(request.param, runs, work)
    check_ok(results)
    return results


def runs_of(results, name):
    return [r.result["runs"][name] for r in results]


def test_two_ranks_match_the_single_process_reference(two_ranks, reference):
    for run in runs_of(two_ranks, "full"):
        assert run["hashes"] == reference
        assert run["steps"] == list(range(len(reference)))


def test_every_world_size_gives_the_same_global_batches(other_world, two_ranks, reference):
    for run in runs_of(other_world, "full"):
        assert run["hashes"] == reference
    # a global batch of 2 rounds: each rank accumulates 2 x (its lanes) microbatches per step
    acc2 = runs_of(two_ranks, "accumulate")[0]
    for run in runs_of(other_world, "accumulate"):
        assert run["microbatches_per_step"] == 2 * LANES // len(other_world)
        assert run["hashes"] == acc2["hashes"]
        assert len(run["hashes"]) == len(reference) // 2


def test_ranks_agree_where_the_data_ends(two_ranks, other_world, reference):
    """Lanes run dry at different steps; ranks still all stop after the same global step."""
    for results in (two_ranks, other_world):
        runs = runs_of(results, "full")
        assert {len(r["hashes"]) for r in runs} == {len(reference)}
        assert {r["final_state_step"] for r in runs} == {len(reference)}
        if len(runs) > 1:
            # some rank still had data for the next step: without the agreement it would have
            # entered the next collective alone and waited for ever
            assert sorted(r["exhausted_locally"] for r in runs) != [True] * len(runs)
            assert any(r["exhausted_locally"] for r in runs)


def test_global_token_counts_do_not_depend_on_the_world_size(two_ranks, other_world):
    base = runs_of(two_ranks, "full")[0]["global_tokens"]
    assert all(isinstance(n, int) and n > 0 for n in base)
    for run in runs_of(other_world, "full"):
        assert run["global_tokens"] == base


@pytest.mark.parametrize("source", ["from_json", "from_dcp"])
def test_resume_a_two_rank_checkpoint_on_another_world_size(other_world, reference, source):
    for run in runs_of(other_world, source):
        assert run["steps"][0] == CUT
        assert run["hashes"] == reference[CUT:]


def test_ranks_that_disagree_refuse_to_start(work, two_ranks):
    """One rank resumes from a checkpoint and the other starts fresh: a clear error on both."""
    runs = [{"name": "mixed", "load": {"json": str(work / f"ckpt-{CUT}.json"), "ranks": [1]}}]
    results = launch(2, runs, work)
    for r in results:
        assert r.returncode == 1, r.stderr[-2000:]
        assert "ConfigError: data-parallel ranks disagree about the run" in r.stderr
        assert "step differs between ranks: {0: 0, 1: 10}" in r.stderr


def test_tensor_parallel_peers_read_the_same_data(other_world, reference):
    """On a (dp=2, tp=2) device mesh the loader splits lanes over the dp dimension only."""
    if len(other_world) != 4:
        pytest.skip("needs the 4-rank launch")
    runs = runs_of(other_world, "mesh")  # global ranks 0,1 are replica 0; 2,3 are replica 1
    assert [(r["dp_rank"], r["dp_world_size"]) for r in runs] == [(0, 2), (0, 2), (1, 2), (1, 2)]
    assert runs[0]["local"] == runs[1]["local"] and runs[2]["local"] == runs[3]["local"]
    assert runs[0]["local"] != runs[2]["local"]
    assert runs[0]["lanes"][0] == [0, 1] and runs[2]["lanes"][0] == [2, 3]
    for run in runs:
        assert run["hashes"] == reference
