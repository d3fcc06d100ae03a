"""zephon-torchtitan installed alone (kernel, zephon-torch, torchtitan) in a fresh virtual environment.

The shared development environment has every plugin installed, which would hide a missing
dependency. A script there builds the dataloader through torchtitan's ``Config.build`` on a
one-rank gloo group, checkpoints it with ``torch.distributed.checkpoint`` mid-run and resumes.
Opt-in (``ZEPHON_TEST_ALONE=1``): it installs torch and torchtitan's dependencies (~2 GB).
"""

from __future__ import annotations

import os

import pytest
from zephon_testkit.isolated import check_alone_with_torch

SCRIPT = r"""
import os, tempfile
import numpy as np
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from zephon_core import Dataset, Pipeline, StaticMixtureWorkSource
from zephon_torchtitan import ZephonDataLoader

d = tempfile.mkdtemp()
dist.init_process_group("gloo", init_method=f"file://{d}/store", rank=0, world_size=1)
def build(seq_len, microbatch_size):
    def rows(p):
        ids = np.arange(seq_len + 1, dtype=np.int64) + p["i"]
        return {"input_ids": ids[:-1], "labels": ids[1:]}
    ws = StaticMixtureWorkSource([Dataset.from_records("d", [{"i": i} for i in range(200)])], chunk_size=16, seed=1)
    return Pipeline(ws).map_transform(rows).batch(microbatch_size=microbatch_size).options(lanes=4)
def make():
    return ZephonDataLoader.Config(pipeline=build).build(dp_world_size=1, dp_rank=0, tokenizer=None, seq_len=8, local_batch_size=2)
dl = make()
it = iter(dl)
first = [next(it)[0]["input"].tolist() for _ in range(8)]
dcp.save({"dataloader": dl}, checkpoint_id=f"{d}/ckpt")
rest = [next(it)[0]["input"].tolist() for _ in range(8)]
dl.close()
again = make()
dcp.load({"dataloader": again}, checkpoint_id=f"{d}/ckpt")
it = iter(again)
assert [next(it)[0]["input"].tolist() for _ in range(8)] == rest
dist.destroy_process_group()
print("ALONE OK")
"""


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.skipif(
    os.environ.get("ZEPHON_TEST_ALONE") != "1",
    reason="installs torch and torchtitan (~2 GB) into a fresh venv; set ZEPHON_TEST_ALONE=1 to run it",
)
def test_installed_alone(tmp_path):
    check_alone_with_torch(
        "zephon-torchtitan",
        tmp_path,
        SCRIPT,
        present={"zephon-torch", "torch", "torchtitan"},
        absent={"megatron-core", "zephon-tokenize", "zephon-pack"},
        timeout=300,
    )
