"""torchtitan's own CheckpointManager (DCP) checkpoints the Zephon dataloader on 2 dp ranks; it resumes on 1 and 4.

Real ranks under ``torchrun`` run the package's example (torchtitan's optimizer, scheduler,
dataloader build call and ``CheckpointManager``): 12 steps on 2 ranks, checkpointing every 4,
then the step-8 checkpoint resumed on 1 and (with ``-m exhaustive``) on 4 ranks. Every global batch's SHA-256 (gathered
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




@pytest.fixture(scope="module")
def full(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[int, str]]:
    """The uninterrupted 2-rank run, once for both resumes: its checkpoints and batch hashes."""
    tmp = tmp_path_factory.mktemp("titan")
    finish(torchrun(2, tmp / "full", tmp / "full.json", tmp), "2-rank run", timeout=150)
    reference = {int(k): v for k, v in json.loads((tmp / "full.json").read_text()).items()}
    assert sorted(reference) == list(range(1, 13))
    assert len(set(reference.values())) == 12  # every step trains on other rows
    assert (tmp / "full" / "checkpoint" / "step-8").is_dir()
    return tmp / "full", reference


# Growing to 4 ranks starts 4 more torch processes (about half a minute on 2 cores) for no code the
# shrink to 1 skips: either way DCP hands each rank the per-lane keys of the lanes it now owns (on 1
# rank, lanes written by both old ranks), and contrib/zephon-torch/tests/test_torch_dataset_ranks.py
# resumes a 2-rank state on 1 and 4 real ranks in every run. The 4-rank resume runs with -m exhaustive.
@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.parametrize("nproc", [1, pytest.param(4, marks=pytest.mark.exhaustive)])
def test_checkpoint_on_2_ranks_resumes_on_1_and_4(full: tuple[Path, dict[int, str]], nproc: int, tmp_path: Path) -> None:
    saved, reference = full
    dump = tmp_path / "resume"
    shutil.copytree(saved / "checkpoint" / "step-8", dump / "checkpoint" / "step-8")
    finish(torchrun(nproc, dump, tmp_path / "resume.json", tmp_path, "--load-step", "8"), f"resume on {nproc} rank(s)", timeout=150)
    resumed = {int(k): v for k, v in json.loads((tmp_path / "resume.json").read_text()).items()}
    assert sorted(resumed) == [9, 10, 11, 12], (nproc, sorted(resumed))
    assert resumed == {s: reference[s] for s in (9, 10, 11, 12)}, f"resume on {nproc} rank(s) changed the batches"
