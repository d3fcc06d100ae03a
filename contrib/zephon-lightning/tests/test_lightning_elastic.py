"""Lightning (strategy="ddp", gloo) on real processes: checkpoint on 2, resume on 1 and 4, same global batches.

The package's example is run as printed: Lightning starts 2 processes that train 24 steps; ``ModelCheckpoint``
saves ``step=12.ckpt`` (the datamodule's state holds the position of every lane); runs resume from
it on 1 and 4 devices (``trainer.fit(ckpt_path=...)``). Every microbatch the
model receives is hashed; a global step's hash joins its microbatches in lane order, so it does not
depend on the number of processes. Steps 12-23 must hash as in the uninterrupted 2-process run.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "train_tiny_lm.py"
LANES, STEPS, SAVE = 4, 24, 12


def launch(world: int, out: Path, record: Path, tmp: Path, *extra: str) -> None:
    env = {**os.environ, "TMPDIR": str(tmp), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, str(EXAMPLE), "--devices", str(world), "--out", str(out), "--record", str(record)]
    cmd += ["--max-steps", str(STEPS), "--save-every", str(SAVE), *extra]
    proc = subprocess.run(cmd, env=env, cwd=tmp, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]


def step_hashes(record: Path, first_step: int = 0) -> dict[int, str]:
    """Global step -> SHA-256 over its microbatches, ordered by (round, lane) whatever the process count."""
    ranks = sorted(record.glob("rank*.json"), key=lambda p: int(p.stem[4:]))
    world = len(ranks)
    per = LANES // world  # lanes per process: one microbatch each per round; one round per step here
    keyed: dict[tuple[int, int], str] = {}
    for r, path in enumerate(ranks):
        for j, h in enumerate(json.loads(path.read_text())["hashes"]):
            keyed[(first_step + j // per, r * per + j % per)] = h
    steps = sorted({s for s, _ in keyed})
    return {s: hashlib.sha256("".join(keyed[(s, lane)] for lane in range(LANES)).encode()).hexdigest() for s in steps}


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pl2")
    launch(2, tmp / "run", tmp / "rec", tmp)
    assert (tmp / "run" / f"step={SAVE}.ckpt").is_file()
    hashes = step_hashes(tmp / "rec")
    assert sorted(hashes) == list(range(STEPS))
    return tmp, hashes


@pytest.mark.parametrize("world", [1, 4])
def test_resume_from_a_lightning_checkpoint_on_another_device_count(two, world, tmp_path):
    src, full = two
    launch(world, tmp_path / "run", tmp_path / "rec", tmp_path, "--resume", str(src / "run" / f"step={SAVE}.ckpt"))
    resumed = step_hashes(tmp_path / "rec", first_step=SAVE)
    assert sorted(resumed) == list(range(SAVE, STEPS))
    assert resumed == {s: full[s] for s in range(SAVE, STEPS)}
