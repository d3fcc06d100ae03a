"""The Hugging Face Trainer on real gloo processes: checkpoint on 2, resume on 1 and 4, same global batches.

The package's example is run as printed (``torchrun``): 2 processes train 24 steps and the Trainer
saves ``checkpoint-12`` (with the data position of every lane); copies of that run resume from
``checkpoint-12`` on 1 and (with ``-m exhaustive``) 4 processes with ``resume_from_checkpoint=True``. Every microbatch the
model receives is hashed; a global step's hash joins its microbatches in lane order, so it does not
depend on the number of processes. Steps 12-23 must hash as in the uninterrupted 2-process run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from zephon_torch.testing.trainers import global_step_hashes

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "train_tiny_llama.py"
LANES, STEPS, SAVE = 4, 24, 12


def torchrun(world: int, out: Path, record: Path, tmp: Path, *extra: str) -> None:
    env = {
        **os.environ,
        "TMPDIR": str(tmp),
        "HF_HOME": str(tmp / "hf"),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
    }
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={world}", str(EXAMPLE)]
    cmd += ["--out", str(out), "--record", str(record), "--max-steps", str(STEPS), "--save-steps", str(SAVE), *extra]
    proc = subprocess.run(cmd, env=env, cwd=tmp, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]




@pytest.fixture(scope="module")
def two(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hf2")
    torchrun(2, tmp / "run", tmp / "rec", tmp)
    assert (tmp / "run" / f"checkpoint-{SAVE}" / "zephon_data_state.json").is_file()
    hashes = global_step_hashes(tmp / "rec", LANES)
    assert sorted(hashes) == list(range(STEPS))
    return tmp, hashes


# Growing to 4 processes starts 4 more torch processes (about 40 s on 2 cores) for no code the shrink
# to 1 skips: the Trainer loads the merged lane state through zephon-torch either way, and
# contrib/zephon-torch/tests/test_torch_dataset_ranks.py resumes such a 2-rank state on 1 and 4 real
# ranks in every run. The 4-process resume runs with -m exhaustive.
@pytest.mark.parametrize("world", [1, pytest.param(4, marks=pytest.mark.exhaustive)])
def test_resume_from_the_trainers_checkpoint_on_another_process_count(two, world, tmp_path):
    src, full = two
    run = tmp_path / "run"
    shutil.copytree(src / "run" / f"checkpoint-{SAVE}", run / f"checkpoint-{SAVE}")  # as if the job died after it
    torchrun(world, run, tmp_path / "rec", tmp_path, "--resume")
    resumed = global_step_hashes(tmp_path / "rec", LANES, first_step=SAVE)
    assert sorted(resumed) == list(range(SAVE, STEPS))
    assert resumed == {s: full[s] for s in range(SAVE, STEPS)}
