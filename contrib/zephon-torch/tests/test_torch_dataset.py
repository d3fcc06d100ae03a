"""``to_torch_dataset`` in one process: DataLoader tensors, StatefulDataLoader round trips, refused workers.

Ranks are given explicitly here (no process group); real gloo ranks resuming on other world sizes
are in ``test_torch_dataset_ranks.py``. Exactness is checked by hashing global batches against the
kernel's uninterrupted single-process reference.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader
from zephon_torch import ZephonIterableDataset, merge_dataloader_states, to_torch_dataset
from zephon_torch.testing.dataset_rank import hash_steps
from zephon_torch.testing.text import LANES, build

from zephon_core import CheckpointError, ConfigError
from zephon_core.conformance.harness import run_global

StatefulDataLoader = pytest.importorskip("torchdata.stateful_dataloader").StatefulDataLoader

CUT = 6  # global steps before a checkpoint


@pytest.fixture(scope="module")
def reference() -> list[str]:
    return run_global(build, lanes=LANES, world_size=1, runner="threads").hashes


def take(loader, n: int) -> list[dict[str, np.ndarray]]:
    out = []
    if n == 0:
        return out
    for mb in loader:
        out.append({k: t.numpy().copy() for k, t in mb.items()})
        if len(out) == n:
            break
    return out


def rest(loader) -> list[dict[str, np.ndarray]]:
    return [{k: t.numpy().copy() for k, t in mb.items()} for mb in loader]


def test_dataloader_yields_the_reference_batches_as_tensors(reference):
    with to_torch_dataset(build()) as ds:
        assert isinstance(ds, torch.utils.data.IterableDataset)
        first = next(iter(DataLoader(ds, batch_size=None)))
        assert set(first) >= {"input_ids", "num_valid_tokens"}
        assert all(isinstance(t, torch.Tensor) for t in first.values())
        got = [{k: t.numpy() for k, t in first.items()}, *rest(DataLoader(ds, batch_size=None))]
    assert hash_steps([got], LANES) == reference


def test_stateful_dataloader_resumes_exactly_mid_round(reference):
    """A state after any microbatch (here in the middle of a round) resumes the same rank exactly."""
    full = rest(StatefulDataLoader(to_torch_dataset(build()), batch_size=None))
    cut = CUT * LANES + 1
    dl = StatefulDataLoader(to_torch_dataset(build()), batch_size=None)
    head = take(dl, cut)
    state = json.loads(json.dumps(dl.state_dict()))  # plain JSON all the way down
    assert state["dataset_state"]["mid_round"] is True
    dl.dataset.close()
    dl2 = StatefulDataLoader(to_torch_dataset(build()), batch_size=None)
    dl2.load_state_dict(state)
    tail = rest(dl2)
    assert len(head) + len(tail) == len(full)
    for a, b in zip(head + tail, full):
        assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    assert hash_steps([head + tail], LANES) == reference


def test_load_state_dict_on_a_running_loader_rebuilds_from_the_factory(reference):
    dl = StatefulDataLoader(to_torch_dataset(build), batch_size=None)
    head = take(dl, CUT * LANES)
    state = dl.state_dict()
    take(dl, 5)  # train on, then roll back to the checkpoint on the same loader
    dl.load_state_dict(state)
    assert hash_steps([head + rest(dl)], LANES) == reference

    plain = StatefulDataLoader(to_torch_dataset(build()), batch_size=None)
    take(plain, 1)
    plain.load_state_dict(state)
    with pytest.raises(CheckpointError, match="needs a pipeline factory"):
        next(iter(plain))
    plain.dataset.close()


def test_two_ranks_merge_and_resume_on_one_and_four(reference):
    """Ranks given explicitly; states merged at a global-step boundary resume on any world size."""
    states, heads = [], []
    for rank in range(2):
        dl = StatefulDataLoader(to_torch_dataset(build, dp_rank=rank, dp_world_size=2), batch_size=None)
        assert dl.dataset.lanes_per_rank == 2
        heads.append(take(dl, CUT * 2))
        states.append(json.loads(json.dumps(dl.state_dict())))
        dl.dataset.close()
    assert hash_steps(heads, LANES) == reference[:CUT]
    merged = merge_dataloader_states(states)
    assert sorted(merged["dataset_state"]["lanes"], key=int) == ["0", "1", "2", "3"]
    for world in (1, 4):
        tails = []
        for rank in range(world):
            dl = StatefulDataLoader(to_torch_dataset(build, dp_rank=rank, dp_world_size=world), batch_size=None)
            dl.load_state_dict(json.loads(json.dumps(merged)))
            tails.append(rest(dl))
        assert hash_steps(tails, LANES) == reference[CUT:], world


def test_a_mid_round_state_does_not_merge():
    states = []
    for rank in range(2):
        dl = StatefulDataLoader(to_torch_dataset(build(), dp_rank=rank, dp_world_size=2), batch_size=None)
        take(dl, 3)  # one and a half rounds of this rank's two lanes
        states.append(dl.state_dict())
        dl.dataset.close()
    with pytest.raises(CheckpointError, match=r"same global-step boundary.*rank 0 at step 1 \(mid-round\)"):
        merge_dataloader_states(states)
    with pytest.raises(CheckpointError, match="not a StatefulDataLoader"):
        merge_dataloader_states([{"_num_yielded": 3}])


def test_dataloader_workers_are_refused_with_the_reason():
    ds = to_torch_dataset(build())
    with pytest.raises(Exception, match=r"num_workers>0\) is not supported.*own workers"):
        next(iter(DataLoader(ds, batch_size=None, num_workers=1)))
    with pytest.raises(ConfigError, match="num_workers>0"):
        import pickle

        pickle.dumps(ds)
    ds.close()


@pytest.mark.slow
def test_bad_inputs_are_config_errors():
    with pytest.raises(ConfigError, match="lanes do not fit"):
        to_torch_dataset(build(), dp_rank=0, dp_world_size=3)
    with pytest.raises(ConfigError, match="must return a zephon_core.Pipeline"):
        to_torch_dataset(lambda: 42)
    assert isinstance(to_torch_dataset(build), ZephonIterableDataset)
