"""zephon-megatron installed alone (kernel, zephon-torch, megatron-core) in a fresh virtual environment.

The shared development environment has every plugin installed, which would hide a missing
dependency. A script there initialises ``megatron.core.parallel_state`` on a one-rank gloo group,
takes the data state after two iterations and resumes it. Opt-in (``ZEPHON_TEST_ALONE=1``): it
installs torch (~1 GB).
"""

from __future__ import annotations

import os

import pytest
from zephon_testkit.isolated import check_alone_with_torch

SCRIPT = r"""
import tempfile
import numpy as np
import torch.distributed as dist
from megatron.core import parallel_state
from zephon_core import Dataset, Pipeline, StaticMixtureWorkSource
from zephon_megatron import ZephonMegatronData

def main():
    d = tempfile.mkdtemp()
    dist.init_process_group("gloo", init_method=f"file://{d}/store", rank=0, world_size=1)
    parallel_state.initialize_model_parallel()
    def build():
        rows = lambda p: {"tokens": np.arange(8, dtype=np.int64) + p["i"]}
        ws = StaticMixtureWorkSource([Dataset.from_records("d", [{"i": i} for i in range(200)])], chunk_size=16, seed=1)
        return Pipeline(ws).map_transform(rows).batch(microbatch_size=2).options(lanes=4)
    data = ZephonMegatronData(build(), micro_batch_size=2, global_batch_size=16)
    for _ in range(2 * data.num_microbatches):
        next(data)
    state = data.state_dict()
    rest = [next(data)["tokens"].tolist() for _ in range(data.num_microbatches)]
    data.close()
    again = ZephonMegatronData(build(), micro_batch_size=2, global_batch_size=16)
    again.load_state_dict(state, consumed_samples=32)
    assert [next(again)["tokens"].tolist() for _ in range(again.num_microbatches)] == rest
    assert again.consumed_samples == 48
    parallel_state.destroy_model_parallel()
    dist.destroy_process_group()
    print("ALONE OK")

if __name__ == "__main__":
    main()
"""


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.skipif(
    os.environ.get("ZEPHON_TEST_ALONE") != "1",
    reason="installs torch and megatron-core (~1 GB) into a fresh venv; set ZEPHON_TEST_ALONE=1 to run it",
)
def test_installed_alone(tmp_path):
    check_alone_with_torch(
        "zephon-megatron",
        tmp_path,
        SCRIPT,
        present={"zephon-torch", "torch", "megatron-core"},
        absent={"torchtitan", "zephon-tokenize", "zephon-pack"},
        timeout=300,
    )
