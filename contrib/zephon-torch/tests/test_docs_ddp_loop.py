"""The plain DDP loop of docs/integrating-with-your-trainer.md runs as written, under torchrun.

Two ranks train 7 steps, checkpointing after step 5 (the loop saves every 5 steps). Then, as if the
job had died there, one rank resumes from step 5 and trains steps 5 and 6. It sees the same global
batches, so its losses agree with the 2-rank run's to float tolerance (only the order of gradient
sums differs between world sizes). Each step costs about a second of CPU (a 50257-token
output layer), and the first resumed steps already show a wrong data position or optimizer state.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("zephon_tokenize")
pytest.importorskip("zephon_pack")

DOC = Path(__file__).resolve().parents[3] / "docs" / "integrating-with-your-trainer.md"


def torchrun(script: Path, nproc: int, steps: int, ckpt: Path, tmp: Path) -> dict[int, float]:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}"]
    cmd += [str(script), "--steps", str(steps), "--ckpt", str(ckpt)]
    env = {**os.environ, "TMPDIR": str(tmp), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return {int(s): float(v) for s, v in re.findall(r"^step (\d+) loss ([0-9.]+)$", proc.stdout, flags=re.M)}


@pytest.mark.slow
def test_the_ddp_loop_resumes_on_another_world_size(tmp_path):
    blocks = re.findall(r'```python title="train_ddp.py"\n(.*?)```', DOC.read_text(), flags=re.S)
    assert len(blocks) == 1
    script = tmp_path / "train_ddp.py"
    script.write_text(blocks[0])

    on_two = torchrun(script, 2, 7, tmp_path / "ckpt", tmp_path)
    assert sorted(on_two) == list(range(7))
    assert sorted(p.name for p in (tmp_path / "ckpt").glob("step-*.pt")) == ["step-5.pt"]
    on_one = torchrun(script, 1, 7, tmp_path / "ckpt", tmp_path)
    assert sorted(on_one) == [5, 6]
    for s in on_one:
        assert math.isclose(on_two[s], on_one[s], rel_tol=1e-5), (s, on_two[s], on_one[s])
