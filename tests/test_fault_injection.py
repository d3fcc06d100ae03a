"""SIGKILL a training process at many random moments and resume each time on another world size and
runner: every global step's records equal those of an uninterrupted run — nothing lost, repeated or
reordered — and no worker process or /dev/shm entry is left behind."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import shm_entries
from tests.killable_trainer import LANES, builder

ROOT = Path(__file__).resolve().parents[1]
KILLS = 20
CONFIGS = [(2, "threads"), (4, "processes"), (1, "inline"), (4, "threads"), (2, "processes"), (1, "threads")]


def _uninterrupted() -> dict[int, list[list[int]]]:
    out: dict[int, list[list[int]]] = {}
    with builder().options(lanes=LANES, runner="threads") as p:
        rows: list[list[int]] = []
        for i, b in enumerate(p):
            rows.extend(list(lin) for lin in b.lineage)
            if i % LANES == LANES - 1:
                out[len(out) + 1] = rows
                rows = []
    return out


def _children(pid: int) -> list[int]:
    try:
        return [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _start(folder: Path, world: int, runner: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.killable_trainer", str(folder), str(world), runner],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.slow
def test_sigkill_at_random_moments_loses_repeats_and_reorders_nothing(tmp_path):
    rng = random.Random(20261130)
    shm_before = shm_entries()
    kills = 0
    orphans: list[int] = []
    attempt = 0
    while not (tmp_path / "done").exists():
        world, runner = CONFIGS[attempt % len(CONFIGS)]
        attempt += 1
        proc = _start(tmp_path, world, runner)
        assert proc.stdout is not None
        line = proc.stdout.readline()  # "started" once the pipelines are built and resumed
        # Kill after 0-2 whole steps, then at a random moment within the next ones (a step's sleep,
        # its checkpoint, the next batches): counted in steps, so a faster machine cannot finish the
        # run before the kills are done.
        started = line.strip() == "started"
        for _ in range(rng.randint(0, 2) if started else 0):
            if not proc.stdout.readline():
                break
        if kills < KILLS and started and proc.poll() is None:
            time.sleep(rng.uniform(0.0, 0.15))
            kids = _children(proc.pid)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            kills += 1
            orphans += kids
        else:
            _, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err[-3000:]
        assert attempt < 200
    assert kills >= KILLS

    got: dict[int, list[list[int]]] = {}
    for line in (tmp_path / "steps.jsonl").read_text().splitlines():
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:  # a line cut by the kill, never checkpointed
            continue
        got[rec["step"]] = rec["rows"]  # a step replayed after a kill overwrites what was written before it
    want = _uninterrupted()
    assert sorted(got) == sorted(want)
    for step in want:
        assert got[step] == want[step], f"global step {step} differs after {kills} kills"

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(os.path.exists(f"/proc/{pid}") for pid in orphans):
        time.sleep(0.2)
    alive = [pid for pid in orphans if os.path.exists(f"/proc/{pid}") and "zombie" not in _state(pid)]
    assert alive == [], f"worker processes outlived their killed parent: {alive}"
    assert shm_entries() - shm_before == set()


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().lower()
    except OSError:
        return "gone"
