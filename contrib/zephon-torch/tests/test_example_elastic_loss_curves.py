"""The loss-curve experiment, short: Zephon's losses after a resume agree across world sizes, the standard loader's data does not.

Runs ``examples/elastic_loss_curves.py`` as a user would (a separate process that spawns its
own gloo ranks), with a tiny model and 8 steps, checkpoint at step 4, resumes on 1 and 2 ranks in
every run (on 1, 2 and 4 with ``-m exhaustive``).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("zephon_tokenize")
pytest.importorskip("zephon_pack")
pytest.importorskip("matplotlib")

SCRIPT = Path(__file__).resolve().parents[1] / "examples" / "elastic_loss_curves.py"
TINY = ["--steps", "8", "--checkpoint-step", "4", "--dim", "16", "--layers", "1", "--heads", "2"]
TINY += ["--seq-len", "32", "--vocab", "1024", "--docs", "800", "--warmup", "2", "--timeout", "120"]

# The same rows and weights give the same per-microbatch gradients; only the order of float32 sums
# (gradient accumulation vs. the gloo all-reduce) differs between world sizes.
REL_TOL = 1e-5


# Each world size is a launch of that many torch-importing ranks. Resuming on 1 rank already shows
# another world size (Zephon: same batches and losses; the standard loader: other rows) and 2 ranks
# the same one; the 4 ranks of the third launch repeat the first case, while the Zephon loader's
# resume of a 2-rank checkpoint on 4 real ranks is checked in every run by
# test_multiprocess.py::test_resume_a_two_rank_checkpoint_on_another_world_size. -m exhaustive runs all three.
@pytest.mark.slow
@pytest.mark.parametrize(
    "worlds", [(1, 2), pytest.param((1, 2, 4), marks=pytest.mark.exhaustive)], ids=lambda w: "-".join(map(str, w))
)
def test_zephon_losses_agree_across_world_sizes_after_resume(tmp_path, worlds):
    out = tmp_path / "out"
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    cmd = [sys.executable, str(SCRIPT), "--out", str(out), *TINY, "--worlds", *map(str, worlds)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=420)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    summary = json.loads((out / "results.json").read_text())
    runs, verdict = summary["runs"], summary["verdict"]

    # Zephon: every global batch after the resume is the base run's, on every world size ...
    for world, v in verdict["zephon"].items():
        assert v["first_step"] == 4 and v["steps"] == 4
        assert v["hashes_matched"] == 4, world
    # ... so the losses agree to float tolerance, and bit for bit on the same world size
    base = runs["zephon-base-w2"]["loss"][4:]
    assert sorted(verdict["zephon"]) == sorted(f"{w} rank(s)" for w in worlds)
    for world in worlds:
        losses = runs[f"zephon-resume-w{world}"]["loss"]
        assert all(math.isclose(a, b, rel_tol=REL_TOL) for a, b in zip(losses, base)), (world, losses, base)
    assert runs["zephon-resume-w2"]["loss"] == base

    # The standard loader resumes exactly on the same world size, and on another one trains on other rows.
    std = verdict["standard"]
    assert std["2 rank(s)"]["hashes_matched"] == 4
    for world in (f"{w} rank(s)" for w in worlds if w != 2):
        assert std[world]["hashes_matched"] == 0, std[world]
        assert std[world]["max_abs_loss_diff"] > 1e-3

    assert (out / "loss_curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = (out / "hashes.md").read_text()
    assert table.count("| ✓ " * len(worlds) + "| `") == 4  # the Zephon columns of the 4 resumed steps
