"""zephon-torch installed alone, with only its declared dependencies, in a fresh virtual environment.

The shared development environment has every plugin installed, which would hide a missing
dependency. Here: a new venv, the kernel, then this package (torch held to the CPU build by the
repository's constraints file), and a script that runs a pipeline through the loader on a real
one-rank gloo process group, checkpoints it and resumes it. Opt-in (``ZEPHON_TEST_ALONE=1``):
copying torch into a new environment alone takes longer than the rest of the package's tests.
"""

from __future__ import annotations

import os

import pytest
from zephon_testkit.isolated import check_alone_with_torch

SCRIPT = r"""
import os, sys, tempfile
import numpy as np
import torch, torch.distributed as dist
from zephon_core import Dataset, Pipeline, StaticMixtureWorkSource
from zephon_torch import ZephonLoader, load_checkpoint, save_checkpoint

d = tempfile.mkdtemp()
dist.init_process_group("gloo", init_method=f"file://{d}/store", rank=0, world_size=1)
def rows(p):
    return {"x": np.full(3, p["i"], dtype=np.int64)}
def build():
    ws = StaticMixtureWorkSource([Dataset.from_records("d", [{"i": i} for i in range(400)])], chunk_size=16, seed=1)
    return Pipeline(ws).map_transform(rows).batch(microbatch_size=4).options(lanes=4)
loader = ZephonLoader(build(), global_batch_size=32)
seen = []
for step in loader:
    assert all(isinstance(mb["x"], torch.Tensor) for mb in step)
    seen.append(loader.global_batch_hash(step))
    if step.step == 4:
        save_checkpoint(loader, os.path.join(d, "ckpt.json"))
loader.close()
again = ZephonLoader(build(), global_batch_size=32)
again.load_state_dict(load_checkpoint(os.path.join(d, "ckpt.json")))
assert [again.global_batch_hash(s) for s in again] == seen[5:]
assert len(seen) == 400 // 32, len(seen)
dist.destroy_process_group()
for heavy in ("tokenizers", "pyarrow", "matplotlib"):
    assert heavy not in sys.modules, heavy
print("ALONE OK")
"""


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.skipif(
    os.environ.get("ZEPHON_TEST_ALONE") != "1",
    reason="installs torch (~1 GB, 1-2 min) into a fresh venv; set ZEPHON_TEST_ALONE=1 to run it",
)
def test_installed_alone(tmp_path):
    check_alone_with_torch(
        "zephon-torch",
        tmp_path,
        SCRIPT,
        present={"torch", "numpy"},
        absent={"zephon-tokenize", "zephon-pack", "matplotlib", "tokenizers"},
        timeout=180,
    )
