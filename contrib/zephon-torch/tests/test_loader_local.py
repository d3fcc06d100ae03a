"""The loader in one process (no process group): tensors, rank discovery, start-up checks, state layout.

Multi-rank behaviour is tested with real processes in ``test_multiprocess.py``; here ranks are
given explicitly or through ``RANK``/``WORLD_SIZE`` to check what does not need collectives.
"""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
import torch
from torch.distributed.checkpoint.stateful import Stateful
from zephon_torch import GlobalStep, ZephonLoader, to_tensors
from zephon_torch.tensors import accelerator_available
from zephon_torch.testing.text import LANES, MICROBATCH, build

from zephon_core import CheckpointError, ConfigError, merge_checkpoints
from zephon_core.conformance.harness import run_global


@pytest.fixture(scope="module")
def reference() -> list[str]:
    return run_global(build, lanes=LANES, world_size=1, runner="threads").hashes


def first_steps(loader: ZephonLoader, n: int) -> list[GlobalStep]:
    out = []
    for step in loader:
        out.append(step)
        if len(out) == n:
            break
    return out


def test_tensors_share_memory_with_the_arrays():
    arrays = {"input_ids": np.arange(12, dtype=np.int32).reshape(3, 4), "n": np.array([1, 2, 3])}
    tensors = to_tensors(arrays)
    assert tensors["input_ids"].data_ptr() == arrays["input_ids"].ctypes.data
    arrays["input_ids"][0, 0] = 99
    assert tensors["input_ids"][0, 0].item() == 99
    assert tensors["input_ids"].dtype == torch.int32 and tensors["n"].dtype == torch.int64
    frozen = np.arange(3)
    frozen.flags.writeable = False
    assert torch.equal(to_tensors({"x": frozen})["x"], torch.arange(3))  # read-only arrays are copied once


def test_a_single_rank_yields_the_reference_global_batches(reference):
    with ZephonLoader(build()) as loader:
        assert isinstance(loader, Stateful)
        assert (loader.info.rank, loader.info.world_size, loader.info.distributed) == (0, 1, False)
        assert loader.microbatches_per_step == LANES
        hashes = []
        for step in loader:
            assert len(step) == LANES and step.lanes == list(range(LANES))
            for mb, batch in zip(step, step.batches):
                want = batch.to_training()
                assert set(mb) == set(want)
                for key, tensor in mb.items():
                    assert isinstance(tensor, torch.Tensor)
                    np.testing.assert_array_equal(tensor.numpy(), want[key])
            assert step.num_tokens == step.global_num_tokens == sum(int(mb["num_valid_tokens"].sum()) for mb in step)
            hashes.append(loader.global_batch_hash(step))
    assert hashes == reference
    assert loader.finished and loader.exhausted_locally and loader.step == len(reference)


def test_rank_comes_from_the_environment_without_a_process_group(monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    loader = ZephonLoader(build())
    assert (loader.info.rank, loader.info.world_size, loader.info.distributed) == (1, 2, False)
    assert loader.pipeline.run_options.layout().owned == [2, 3]
    assert ZephonLoader(build(), dp_rank=0, dp_world_size=4).pipeline.run_options.layout().owned == [0]


def test_lanes_must_split_over_the_data_parallel_ranks():
    with pytest.raises(ConfigError, match=r"lanes=4 cannot be split evenly over dp_world_size=3") as e:
        ZephonLoader(build(), dp_rank=0, dp_world_size=3)
    assert "multiple of every data-parallel size" in str(e.value)
    assert "e.g. 12" in str(e.value) and "[1, 2, 4]" in str(e.value)


def test_the_global_batch_must_be_whole_rounds():
    round_rows = LANES * MICROBATCH
    with pytest.raises(ConfigError, match=r"global_batch_size=12 rows is not a whole number of rounds") as e:
        ZephonLoader(build(), global_batch_size=12, dp_rank=0, dp_world_size=2)
    assert f"multiple of {round_rows}" in str(e.value)
    loader = ZephonLoader(build(), global_batch_size=3 * round_rows, dp_rank=1, dp_world_size=2)
    assert loader.rounds_per_step == 3 and loader.microbatches_per_step == 3 * LANES // 2


def test_pin_memory_is_refused_without_an_accelerator():
    if accelerator_available():
        pytest.skip("this machine has an accelerator")
    with pytest.raises(ConfigError, match="pin_memory=True needs an accelerator"):
        ZephonLoader(build(), pin_memory=True)


def test_state_survives_json_and_torch_save():
    loader = ZephonLoader(build())
    first_steps(loader, 3)
    state = loader.state_dict()
    assert set(state) == {"meta", "lanes"} and set(state["lanes"]) == {"0", "1", "2", "3"}
    assert all(isinstance(v, str) for v in state["lanes"].values())
    assert json.loads(json.dumps(state)) == state
    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    assert torch.load(buf, weights_only=True) == state
    loader.close()


def test_elastic_resume_of_per_rank_states(reference):
    """Two ranks' states, combined lane by lane as DCP does, resume on four ranks and on one."""
    cut = 5
    states = []
    for rank in range(2):
        loader = ZephonLoader(build(), dp_rank=rank, dp_world_size=2)
        first_steps(loader, cut)
        states.append(loader.state_dict())
        loader.close()
    assert states[0]["meta"] == states[1]["meta"]  # DCP writes the shared part once
    lanes = {**states[0]["lanes"], **states[1]["lanes"]}
    hashes_by_rank = []
    for rank in range(4):
        loader = ZephonLoader(build(), dp_rank=rank, dp_world_size=4)
        mine = str(rank)
        loader.load_state_dict({"meta": states[0]["meta"], "lanes": {mine: lanes[mine]}})  # what DCP hands it
        assert loader.step == cut
        hashes_by_rank.append([s.batches for s in loader])
    n = min(len(h) for h in hashes_by_rank)
    from zephon_core import hash_global_batch

    got = [hash_global_batch([b for r in hashes_by_rank for b in r[t]]) for t in range(n)]
    assert got == reference[cut:]
    # the merged kernel checkpoint (what gather_checkpoint returns) works too
    kernel = merge_checkpoints([ZephonLoader(build(), dp_rank=0, dp_world_size=1).kernel_state_dict()])
    one = ZephonLoader(build())
    one.load_state_dict(kernel)
    assert one.step == 0


def test_checkpoints_cut_inside_a_global_step_are_refused():
    loader = ZephonLoader(build(), global_batch_size=2 * LANES * MICROBATCH)
    first_steps(loader, 2)
    state = loader.kernel_state_dict()
    loader.close()
    state["lanes"]["1"]["delivered"] += 1
    with pytest.raises(CheckpointError, match="not taken at a global-step boundary"):
        ZephonLoader(build()).load_state_dict(state)
    state["lanes"]["1"]["delivered"] -= 1
    with pytest.raises(CheckpointError, match="not a multiple of 3 microbatches per lane"):
        ZephonLoader(build(), global_batch_size=3 * LANES * MICROBATCH).load_state_dict(state)


def test_load_after_iteration_is_an_error():
    loader = ZephonLoader(build())
    first_steps(loader, 1)
    with pytest.raises(CheckpointError, match="before iterating"):
        loader.load_state_dict(loader.state_dict())
    loader.close()


def test_the_pipeline_must_end_with_batch():
    from zephon_core import Dataset, Pipeline, StaticMixtureWorkSource

    ws = StaticMixtureWorkSource([Dataset.from_records("d", [{"x": 1}] * 8)], chunk_size=4)
    with pytest.raises(ConfigError, match=r"must end with \.batch"):
        ZephonLoader(Pipeline(ws).options(lanes=2))


def test_gathering_without_a_process_group_says_what_to_do(tmp_path):
    from zephon_torch import gather_checkpoint, load_checkpoint, save_checkpoint

    with pytest.raises(ConfigError, match="needs torch.distributed to reach the other 1 rank"):
        gather_checkpoint(ZephonLoader(build(), dp_rank=0, dp_world_size=2))
    single = ZephonLoader(build())
    first_steps(single, 2)
    merged = save_checkpoint(single, tmp_path / "ckpt.json")  # one rank: no process group needed
    single.close()
    assert load_checkpoint(tmp_path / "ckpt.json") == merged
    resumed = ZephonLoader(build())
    resumed.load_state_dict(merged)
    assert resumed.step == 2
