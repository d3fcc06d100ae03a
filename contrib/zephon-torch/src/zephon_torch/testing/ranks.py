"""Start real ranks as separate processes (what ``torchrun`` does), collect what each one saw.

Subprocesses rather than ``torch.multiprocessing.spawn``: the test must be able to SIGKILL one
rank and keep watching the others, while ``spawn``'s ``join`` terminates every rank as soon as
one fails.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zephon_torch.testing.rank import DEFAULT_PIPELINE

RANK_MODULE = "zephon_torch.testing.rank"
"""Run as ``python -m``: the rank entry point is an installed module, so no path has to be set up."""


@dataclass
class RankResult:
    """How one rank ended: exit code, wall time, what it wrote (:mod:`~zephon_torch.testing.rank`), its stderr."""

    rank: int
    returncode: int
    seconds: float
    result: dict[str, Any]
    stderr: str


def launch(
    world_size: int,
    runs: list[dict[str, Any]],
    tmp: Path,
    *,
    timeout: float = 30.0,
    deadline: float = 240.0,
    kill: tuple[int, int] | None = None,
    kill_signal: int = signal.SIGKILL,
    pipeline: str = DEFAULT_PIPELINE,
    module: str = RANK_MODULE,
) -> list[RankResult]:
    """Run ``runs`` on ``world_size`` gloo ranks; optionally signal rank ``kill[0]`` after its step ``kill[1]``.

    Args:
        runs: what each rank does, in order (see :func:`~zephon_torch.testing.rank.run_one`).
        tmp: a folder for the store, the parameters and every rank's result and stderr.
        pipeline: ``"module:function"`` building the pipeline in each rank.
        module: the rank program, run as ``python -m module PARAMS.json`` (default
            :mod:`~zephon_torch.testing.rank`; :mod:`~zephon_torch.testing.dataset_rank` drives
            ``StatefulDataLoader``).
        timeout: the process group's and the loader's collective timeout (seconds).
        deadline: wall-clock limit for the whole launch; exceeding it is a test failure (a hang).
        kill_signal: SIGKILL (a crash) or SIGSTOP (a rank that is alive but stuck; it is killed
            once every other rank has ended).
    """
    tag = uuid.uuid4().hex[:8]
    work = tmp / f"launch-{tag}"
    work.mkdir(parents=True)
    params = {
        "store": str(work / "store"),
        "timeout": timeout,
        "runs": runs,
        "out": str(work / "rank{rank}.json"),
        "progress": str(work / "progress{rank}.json") if kill else None,
        "pipeline": pipeline,
    }
    (work / "params.json").write_text(json.dumps(params))
    env = {**os.environ, "WORLD_SIZE": str(world_size), "TMPDIR": str(tmp), "OMP_NUM_THREADS": "1"}
    procs = []
    started = time.monotonic()
    for rank in range(world_size):
        err = open(work / f"stderr{rank}.txt", "w")
        p = subprocess.Popen(
            [sys.executable, "-m", module, str(work / "params.json")],
            env={**env, "RANK": str(rank)},
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        procs.append((p, err))
    ended: dict[int, float] = {}
    killed = False
    try:
        while len(ended) < world_size:
            now = time.monotonic()
            if now - started > deadline:
                raise AssertionError(f"ranks still running after {deadline:.0f} s: a hang (see {work})")
            if kill and not killed:
                prog = work / f"progress{kill[0]}.json"
                if prog.exists() and json.loads(prog.read_text())["step"] >= kill[1]:
                    os.kill(procs[kill[0]][0].pid, kill_signal)
                    killed = True
            if killed and kill and kill_signal == signal.SIGSTOP and len(ended) == world_size - 1:
                procs[kill[0]][0].kill()
            for rank, (p, _) in enumerate(procs):
                if rank not in ended and p.poll() is not None:
                    ended[rank] = time.monotonic() - started
            time.sleep(0.05)
    finally:
        for p, err in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
            err.close()
    results = []
    for rank, (p, _) in enumerate(procs):
        out = work / f"rank{rank}.json"
        results.append(
            RankResult(
                rank,
                p.returncode,
                ended[rank],
                json.loads(out.read_text()) if out.exists() else {},
                (work / f"stderr{rank}.txt").read_text(),
            )
        )
    return results


def check_ok(results: list[RankResult]) -> None:
    """Fail with every rank's stderr when any rank did not exit cleanly."""
    bad = [r for r in results if r.returncode != 0]
    if bad:
        raise AssertionError("\n".join(f"rank {r.rank} exited {r.returncode}:\n{r.stderr[-4000:]}" for r in bad))
