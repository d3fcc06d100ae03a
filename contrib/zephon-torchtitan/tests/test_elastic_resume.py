"""torchtitan's own CheckpointManager (DCP) checkpoints the Zephon dataloader on 2 dp ranks; it resumes on 1 and 4.

Real ranks under ``torchrun`` run the package's example (torchtitan's optimizer, scheduler,
dataloader build call and ``CheckpointManager``): 12 steps on 2 ranks, checkpointing every 4,
then the step-8 checkpoint resumed on 1 and on 4 ranks. Every global batch's SHA-256 (gathered
from the ranks' lanes) must equal the uninterrupted run's.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from zephon_torch.testing.trainers import finish

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "train_tiny.py"


def torchrun(nproc: int, dump: Path, hashes: Path, tmp: Path, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "TMPDIR": str(tmp), "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}", str(EXAMPLE)]
    cmd += ["--steps", "12", "--interval", "4", "--dump", str(dump), "--hashes", str(hashes), *extra]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)




@pytest.mark.slow
@pytest.mark.timeout(400)
def test_checkpoint_on_2_ranks_resumes_on_1_and_4(tmp_path: Path) -> None:
    full = tmp_path / "full"
    finish(torchrun(2, full, tmp_path / "full.json", tmp_path), "2-rank run", timeout=150)
    reference = {int(k): v for k, v in json.loads((tmp_path / "full.json").read_text()).items()}
    assert sorted(reference) == list(range(1, 13))
    assert len(set(reference.values())) == 12  # every step trains on other rows
    assert (full / "checkpoint" / "step-8").is_dir()
    runs = {}
    for nproc in (1, 4):
        dump = tmp_path / f"resume{nproc}"
        shutil.copytree(full / "checkpoint" / "step-8", dump / "checkpoint" / "step-8")
        runs[nproc] = torchrun(nproc, dump, tmp_path / f"resume{nproc}.json", tmp_path, "--load-step", "8")
    for nproc, proc in runs.items():
        finish(proc, f"resume on {nproc} rank(s)", timeout=150)
        resumed = {int(k): v for k, v in json.loads((tmp_path / f"resume{nproc}.json").read_text()).items()}
        assert sorted(resumed) == [9, 10, 11, 12], (nproc, sorted(resumed))
        assert resumed == {s: reference[s] for s in (9, 10, 11, 12)}, f"resume on {nproc} rank(s) changed the batches"
