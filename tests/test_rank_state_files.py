"""Per-rank checkpoint files without torch.distributed: ``save_rank_state`` / ``load_merged_state``.

Each rank of a 2-rank run writes its own JSON file; the merged latest complete step resumes on 1
and 4 ranks with global batches hash-identical to an uninterrupted run, from a local folder and
from S3 (moto's real S3 API server on loopback).
"""

from __future__ import annotations

import itertools
import json
import os

import pytest

from zephon_core import CheckpointError, load_merged_state, save_rank_state
from zephon_core.conformance.harness import run_global
from zephon_core.demo import build, make_source

LANES = 4
CUT = 5  # global steps before the checkpoint


def build_small(parallelism: int = 1):
    return build(parallelism, source=make_source(chunk_size=16), microbatch=4).options(flush_every_k_chunks=2)


@pytest.fixture(scope="module")
def reference() -> list[str]:
    hashes = run_global(build_small, lanes=LANES, world_size=1).hashes
    assert len(hashes) > CUT + 3
    return hashes


def rank_states(world_size: int, steps: int) -> list[dict]:
    """Each rank's ``state_dict()`` after ``steps`` global steps, each rank in its own pipeline."""
    per = LANES // world_size
    out = []
    for rank in range(world_size):
        with build_small().options(lanes=LANES, dp_rank=rank, dp_world_size=world_size) as p:
            for _ in itertools.islice(iter(p), steps * per):
                pass
            out.append(p.state_dict())
    return out


@pytest.fixture(scope="module")
def states_at_cut() -> list[dict]:
    return rank_states(2, CUT)


def save_run(root, states, storage_options=None):
    for rank, state in enumerate(states):
        save_rank_state(root, state, rank, len(states), step=CUT, storage_options=storage_options)
    # a later step only rank 0 reached (rank 1 died before writing): not complete, so ignored
    save_rank_state(root, states[0], 0, len(states), step=CUT + 3, storage_options=storage_options)


def check_resumes(merged, reference):
    assert sorted(merged["lanes"], key=int) == [str(lane) for lane in range(LANES)]
    for world in (1, 4):
        assert run_global(build_small, lanes=LANES, world_size=world, resume=merged).hashes == reference[CUT:]


def test_local_folder_resumes_on_other_world_sizes(tmp_path, states_at_cut, reference):
    save_run(tmp_path / "ckpt", states_at_cut)
    files = sorted(os.listdir(tmp_path / "ckpt" / f"step-{CUT}"))
    assert files == ["rank-0-of-2.json", "rank-1-of-2.json"]  # no temporary file left behind
    path = tmp_path / "ckpt" / f"step-{CUT}" / "rank-1-of-2.json"
    assert oct(path.stat().st_mode & 0o777) == "0o644"
    record = json.loads(path.read_text())
    assert (record["step"], record["rank"], record["world_size"]) == (CUT, 1, 2)
    check_resumes(load_merged_state(tmp_path / "ckpt"), reference)
    assert load_merged_state(str(tmp_path / "ckpt"), step=CUT) == load_merged_state(tmp_path / "ckpt")


@pytest.mark.slow  # moto's server takes most of ~15 s to import and start on a shared machine
def test_s3_url_resumes_on_other_world_sizes(states_at_cut, reference):
    pytest.importorskip("moto.server", reason="S3 tests need moto[server] (pip install 'moto[server]' s3fs boto3)")
    pytest.importorskip("s3fs")
    from zephon_testkit.s3 import moto_s3

    with moto_s3("rank-states") as s3:
        url = s3.url("runs/a")
        save_run(url, states_at_cut, s3.storage_options)
        keys = sorted(o["Key"] for o in s3.client.list_objects_v2(Bucket=s3.bucket)["Contents"])
        written = [f"step-{CUT}/rank-0-of-2.json", f"step-{CUT}/rank-1-of-2.json", f"step-{CUT + 3}/rank-0-of-2.json"]
        assert keys == sorted(f"runs/a/{k}" for k in written)
        merged = load_merged_state(url, storage_options=s3.storage_options)
        with pytest.raises(CheckpointError, match=rf"step {CUT + 3} .* is incomplete"):
            load_merged_state(url, step=CUT + 3, storage_options=s3.storage_options)
    check_resumes(merged, reference)


def test_incomplete_and_missing_steps_are_clear_errors(tmp_path, states_at_cut):
    root = tmp_path / "ckpt"
    with pytest.raises(CheckpointError, match="no complete checkpoint step"):
        load_merged_state(root)
    save_rank_state(root, states_at_cut[1], 1, 2, step=CUT)
    with pytest.raises(CheckpointError, match=r"no complete checkpoint step .*\{5: \{2: \[1\]\}\}"):
        load_merged_state(root)
    with pytest.raises(CheckpointError, match=r"step 5 .* is incomplete: rank files present \{2: \[1\]\}"):
        load_merged_state(root, step=CUT)


def test_ranks_at_different_steps_raise_naming_them(tmp_path, states_at_cut):
    later = rank_states(2, CUT + 1)
    root = tmp_path / "ckpt"
    save_rank_state(root, states_at_cut[0], 0, 2, step=CUT)
    save_rank_state(root, later[1], 1, 2, step=CUT)  # rank 1 was one step ahead when it saved "step 5"
    with pytest.raises(CheckpointError, match=rf"rank 0 at step {CUT}, rank 1 at step {CUT + 1}"):
        load_merged_state(root)
    # a file whose content disagrees with its name (copied or renamed by hand)
    root2 = tmp_path / "ckpt2"
    save_rank_state(root2, states_at_cut[0], 0, 2, step=CUT)
    save_rank_state(root2, states_at_cut[1], 1, 2, step=CUT + 1)
    os.replace(root2 / f"step-{CUT + 1}" / "rank-1-of-2.json", root2 / f"step-{CUT}" / "rank-1-of-2.json")
    with pytest.raises(
        CheckpointError, match=rf"rank 1 of 2 at step {CUT + 1} \(file .* names rank 1 of 2 at step {CUT}"
    ):
        load_merged_state(root2)


def test_only_plain_json_is_written(tmp_path, states_at_cut):
    with pytest.raises(CheckpointError, match="not plain JSON data"):
        save_rank_state(tmp_path, {"x": {1, 2}}, 0, 1, step=0)
    with pytest.raises(CheckpointError, match="rank 2 is not below world_size 2"):
        save_rank_state(tmp_path, states_at_cut[0], 2, 2, step=0)
    with pytest.raises(CheckpointError, match="step must be an int >= 0"):
        save_rank_state(tmp_path, states_at_cut[0], 0, 2, step=-1)
    assert not list(tmp_path.rglob("*.json"))
