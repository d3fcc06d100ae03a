"""``StatefulDataLoader(to_torch_dataset(...))`` on real gloo ranks, resumed on another world size.

Two ranks (separate processes, gloo) each save their own ``StatefulDataLoader.state_dict()`` after
the same global step; the states are merged with ``merge_dataloader_states`` and resumed on 1 and
4 ranks. Every global batch must hash as in the kernel's uninterrupted single-process reference.
"""

from __future__ import annotations

import json

import pytest
import torch.distributed as dist
from zephon_torch import merge_dataloader_states
from zephon_torch.testing.ranks import check_ok, launch
from zephon_torch.testing.text import LANES, build

from zephon_core.conformance.harness import run_global

pytest.importorskip("torchdata.stateful_dataloader")
# Each launch starts torch-importing processes: tens of seconds on a shared machine. The same merge
# and resume is checked in one process (ranks given explicitly) in test_torch_dataset.py.
pytestmark = [
    pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(), reason="needs gloo"),
    pytest.mark.slow,
]

CUT = 8  # global steps before the 2-rank checkpoint
MODULE = "zephon_torch.testing.dataset_rank"
PIPELINE = "zephon_torch.testing.text:build"


@pytest.fixture(scope="module")
def reference() -> list[str]:
    return run_global(build, lanes=LANES, world_size=1, runner="threads").hashes


@pytest.fixture(scope="module")
def merged(tmp_path_factory, reference):
    work = tmp_path_factory.mktemp("dsranks")
    runs = [{"name": "full", "save_after": CUT * LANES // 2, "save": str(work / "state-{rank}.json")}]
    results = launch(2, runs, work, module=MODULE, pipeline=PIPELINE)
    check_ok(results)
    assert results[0].result["runs"]["full"]["hashes"] == reference
    path = work / "merged.json"
    path.write_text(
        json.dumps(merge_dataloader_states([json.loads((work / f"state-{r}.json").read_text()) for r in (0, 1)]))
    )
    return work, path


@pytest.mark.parametrize("world", [1, 4])
def test_resume_two_rank_states_on_another_world_size(merged, reference, world):
    work, path = merged
    results = launch(world, [{"name": "resumed", "load": str(path)}], work, module=MODULE, pipeline=PIPELINE)
    check_ok(results)
    assert results[0].result["runs"]["resumed"]["hashes"] == reference[CUT:]
