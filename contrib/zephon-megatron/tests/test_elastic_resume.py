"""Megatron-Core's parallel state and common checkpoint state carry the Zephon data position from 2 dp ranks to 1 and 4.

Real ranks under ``torchrun`` run the package's example: 12 iterations on 4 processes with tensor
parallel size 2 (2 data-parallel ranks, each read by its 2 tensor-parallel ranks), a checkpoint
every 4 iterations through Megatron's common-state strategy, then the iteration-8 checkpoint
resumed on 1 process and (with ``-m exhaustive``) on 4 processes with tensor parallel size 1 (4
data-parallel ranks).
Every global batch's SHA-256 must equal the uninterrupted run's.
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


def torchrun(nproc: int, tp: int, hashes: Path, tmp: Path, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "TMPDIR": str(tmp), "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}", str(EXAMPLE)]
    cmd += ["--iters", "12", "--tp", str(tp), "--hashes", str(hashes), *extra]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)




def read(path: Path) -> dict[int, str]:
    return {int(k): v for k, v in json.loads(path.read_text()).items()}


@pytest.fixture(scope="module")
def full(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[int, str]]:
    """The uninterrupted 2 dp x 2 tp run, once for both resumes: its checkpoints and batch hashes."""
    tmp = tmp_path_factory.mktemp("megatron")
    out = finish(torchrun(4, 2, tmp / "full.json", tmp, "--save", str(tmp / "full")), "2 dp x 2 tp run", timeout=180)
    assert "iteration 12 consumed 192" in out
    reference = read(tmp / "full.json")
    assert sorted(reference) == list(range(1, 13)) and len(set(reference.values())) == 12
    return tmp / "full", reference


# Growing to 4 dp ranks starts 4 more torch processes (about half a minute on 2 cores) for no code
# the shrink to 1 skips: ZephonMegatronData hands the checkpointed lane state to zephon-torch's
# loader either way, and contrib/zephon-torch/tests/test_torch_dataset_ranks.py resumes a 2-rank
# state on 1 and 4 real ranks in every run. The 4-rank resume runs with -m exhaustive.
@pytest.mark.slow
@pytest.mark.timeout(500)
@pytest.mark.parametrize("nproc", [1, pytest.param(4, marks=pytest.mark.exhaustive)])
def test_checkpoint_on_2_dp_ranks_resumes_on_1_and_4(
    full: tuple[Path, dict[int, str]], nproc: int, tmp_path: Path
) -> None:
    saved, reference = full
    ckpt = tmp_path / "ckpt"
    shutil.copytree(saved / "iter_0000008", ckpt / "iter_0000008")
    (ckpt / "latest_checkpointed_iteration.txt").write_text("8")
    proc = torchrun(nproc, 1, tmp_path / "resume.json", tmp_path, "--load", str(ckpt))
    out = finish(proc, f"resume on {nproc} dp rank(s)", timeout=180)
    assert "iteration 9 consumed 144" in out and "iteration 12 consumed 192" in out, out[-2000:]
    resumed = read(tmp_path / "resume.json")
    assert resumed == {i: reference[i] for i in (9, 10, 11, 12)}, f"resume on {nproc} dp rank(s) changed the batches"
