"""A rank dies (SIGKILL) mid-run: the survivor fails fast with a clear error, and the job resumes.

Two ranks checkpoint every 5 global steps. The test kills rank 1 after its 12th step. Rank 0
must not hang in its next collective: it raises ``RankFailureError`` (exit code 17 from the rank
program) well within the collective timeout. Then the job restarts on the one remaining rank
from the last checkpoint on disk and must produce exactly the global batches the reference
produces from that step on.
"""

from __future__ import annotations

import re
import signal

import pytest
import torch.distributed as dist
from zephon_torch.testing.rank import EXIT_RANK_FAILURE
from zephon_torch.testing.ranks import check_ok, launch
from zephon_torch.testing.text import LANES, build

from zephon_core.conformance.harness import run_global

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(), reason="needs gloo"),
]

TIMEOUT = 20.0  # the process group's and the loader's collective timeout, in seconds


def test_survivor_fails_clearly_then_resumes_on_the_remaining_rank(tmp_path):
    reference = run_global(build, lanes=LANES, world_size=1, runner="threads").hashes
    runs = [{"name": "doomed", "save_every": 5, "save_json": str(tmp_path / "ckpt-{step}.json"), "sleep": 0.05}]
    results = launch(2, runs, tmp_path, kill=(1, 12), timeout=TIMEOUT, deadline=180)
    survivor, victim = results
    assert victim.returncode == -9  # SIGKILL
    assert survivor.returncode == EXIT_RANK_FAILURE, survivor.stderr[-3000:]
    error = survivor.result["error"]
    assert error["type"] == "RankFailureError"
    assert "failed on data-parallel rank 0 of 2" in error["message"]
    assert "another rank has likely died" in error["message"]
    assert "restart the job from its last checkpoint" in error["message"]
    # the collective that noticed reports how long it waited: far less than the timeout
    waited = float(re.search(r"after ([0-9.]+) s", error["message"]).group(1))
    assert waited < TIMEOUT

    saved = sorted(int(p.stem.split("-")[1]) for p in tmp_path.glob("ckpt-*.json"))
    assert saved and saved[-1] in (10, 15)  # rank 1 was killed after step 12, so 15 can only exist if it got there
    last = saved[-1]
    resumed = launch(1, [{"name": "resumed", "load": {"json": str(tmp_path / f"ckpt-{last}.json")}}], tmp_path)
    check_ok(resumed)
    run = resumed[0].result["runs"]["resumed"]
    assert run["steps"][0] == last
    assert run["hashes"] == reference[last:]


def test_a_stuck_rank_makes_the_others_fail_after_the_timeout(tmp_path):
    """A rank that stops responding (SIGSTOP) without closing its connections: the timeout fires."""
    timeout = 6.0
    runs = [{"name": "stuck", "sleep": 0.05}]
    results = launch(2, runs, tmp_path, kill=(1, 5), kill_signal=signal.SIGSTOP, timeout=timeout, deadline=120)
    survivor = results[0]
    assert survivor.returncode == EXIT_RANK_FAILURE, survivor.stderr[-3000:]
    message = survivor.result["error"]["message"]
    assert "another rank has likely died or is stuck" in message
    waited = float(re.search(r"after ([0-9.]+) s", message).group(1))
    assert timeout * 0.9 <= waited < timeout + 10
