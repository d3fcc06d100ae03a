"""Lightning (strategy="ddp", gloo) on real processes: checkpoint on 2, resume on 1 and 4, same global batches.

The package's example is run as printed: Lightning starts 2 processes that train 24 steps; ``ModelCheckpoint``
saves ``step=12.ckpt`` (the datamodule's state holds the position of every lane); runs resume from
it on 1 and (with ``-m exhaustive``) 4 devices (``trainer.fit(ckpt_path=...)``). Every microbatch the
model receives is hashed; a global step's hash joins its microbatches in lane order, so it does not
depend on the number of processes. Steps 12-23 must hash as in the uninterrupted 2-process run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from zephon_torch.testing.trainers import global_step_hashes

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "train_tiny_lm.py"
LANES, STEPS, SAVE = 4, 24, 12


def launch(world: int, out: Path, record: Path, tmp: Path, *extra: str) -> None:
    env = {**os.environ, "TMPDIR": str(tmp), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, str(EXAMPLE), "--devices", str(world), "--out", str(out), "--record", str(record)]
    cmd += ["--max-steps", str(STEPS), "--save-every", str(SAVE), *extra]
    proc = subprocess.run(cmd, env=env, cwd=tmp, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]




@pytest.fixture(scope="module")
def two(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pl2")
    launch(2, tmp / "run", tmp / "rec", tmp)
    assert (tmp / "run" / f"step={SAVE}.ckpt").is_file()
    hashes = global_step_hashes(tmp / "rec", LANES)
    assert sorted(hashes) == list(range(STEPS))
    return tmp, hashes


# Growing to 4 devices starts 4 more torch processes (about a minute on 2 cores) for no code the
# shrink to 1 skips: the datamodule hands the merged lane state to zephon-torch either way, and
# contrib/zephon-torch/tests/test_torch_dataset_ranks.py resumes such a 2-rank state on 1 and 4 real
# ranks in every run. The 4-device resume runs with -m exhaustive.
@pytest.mark.parametrize("world", [1, pytest.param(4, marks=pytest.mark.exhaustive)])
def test_resume_from_a_lightning_checkpoint_on_another_device_count(two, world, tmp_path):
    src, full = two
    launch(world, tmp_path / "run", tmp_path / "rec", tmp_path, "--resume", str(src / "run" / f"step={SAVE}.ckpt"))
    resumed = global_step_hashes(tmp_path / "rec", LANES, first_step=SAVE)
    assert sorted(resumed) == list(range(SAVE, STEPS))
    assert resumed == {s: full[s] for s in range(SAVE, STEPS)}
