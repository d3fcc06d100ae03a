"""Helpers for the trainer packages' elastic-resume tests, which launch a trainer's own example.

Each test starts real processes (``torchrun`` or the trainer's launcher), waits for them with a
bound, and compares the global steps a run saw with an uninterrupted run's. The comparison must not
depend on the number of processes, so a global step's hash joins its microbatches in lane order.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest


def finish(proc: subprocess.Popen[str], what: str, timeout: float) -> str:
    """Wait for ``proc`` at most ``timeout`` seconds; its output, or a failure naming ``what``.

    A launch that hangs is killed and fails the test with the tail of what it printed, rather than
    holding the suite until pytest's own timeout.
    """
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        pytest.fail(f"{what} did not finish within {timeout} s:\n{out[-3000:]}")
    assert proc.returncode == 0, f"{what} failed:\n{out[-3000:]}"
    return out


def global_step_hashes(record: Path, lanes: int, first_step: int = 0) -> dict[int, str]:
    """Global step -> SHA-256 over its microbatches in lane order, from ``rank<N>.json`` files.

    Each file holds ``{"hashes": [...]}``, the hashes of the microbatches one process received in
    order; with one microbatch per lane per step, process ``r`` of ``world`` holds lanes
    ``r * lanes // world ...``, so the same step hashes the same on any number of processes.
    """
    ranks = sorted(record.glob("rank*.json"), key=lambda p: int(p.stem[4:]))
    per = lanes // len(ranks)
    keyed: dict[tuple[int, int], str] = {}
    for r, path in enumerate(ranks):
        for j, h in enumerate(json.loads(path.read_text())["hashes"]):
            keyed[(first_step + j // per, r * per + j % per)] = h
    steps = sorted({s for s, _ in keyed})
    return {s: hashlib.sha256("".join(keyed[(s, lane)] for lane in range(lanes)).encode()).hexdigest() for s in steps}
