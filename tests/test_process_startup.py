"""The processes runner starts and stays at full width: a script it cannot import again is a clear error
within seconds, and a worker that dies while idle is replaced (with a warning) without changing a batch."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

from zephon_core import Dataset, Pipeline, StaticMixtureWorkSource
from zephon_core.hashing import hash_arrays

ROOT = Path(__file__).resolve().parents[1]


def plus_one(p: dict[str, Any]) -> dict[str, Any]:
    return {"x": p["x"] + 1}


def _pipeline() -> Pipeline:
    ds = Dataset.from_records("n", [{"x": i} for i in range(600)], 50)
    ws = StaticMixtureWorkSource([ds], chunk_size=10, seed=3)
    return Pipeline(ws).map_transform(plus_one, parallelism=2, runner="processes").batch(5).options(lanes=2)


def _worker_pids(p: Pipeline) -> list[int]:
    [ex] = [e for e in p._engine.executors if getattr(e, "_label", "") == "plus_one"]  # type: ignore[union-attr]
    deadline = time.monotonic() + 10
    while len(ex._ready) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    return [proc.pid for proc in ex._procs]


def test_a_worker_killed_while_idle_is_replaced_and_no_batch_changes():
    with _pipeline() as p:
        expected = [hash_arrays(b.data) for b in p]
    with _pipeline() as p, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        it = iter(p)
        got = [hash_arrays(next(it).data)]
        time.sleep(0.5)  # the queues fill and the workers wait: both idle
        victim = _worker_pids(p)[0]
        os.kill(victim, signal.SIGKILL)
        time.sleep(0.5)
        got += [hash_arrays(b.data) for b in it]
        after = _worker_pids(p)
    assert got == expected
    assert victim not in after and len(set(after)) == 2  # back at full width
    msgs = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert any("'plus_one' died while idle (exit code -9) and was replaced" in m for m in msgs), msgs


UNGUARDED = """
from zephon_core import Dataset, Pipeline, StaticMixtureWorkSource

def double(p):
    return {"x": p["x"] * 2}

ds = Dataset.from_records("n", [{"x": i} for i in range(200)], 20)
p = Pipeline(StaticMixtureWorkSource([ds], chunk_size=10)).map_transform(double, parallelism=2, runner="processes")
with p.batch(4).options(lanes=2) as q:
    print(sum(1 for _ in q))
"""


@pytest.mark.parametrize("guarded", [False, True])
def test_a_script_without_a_main_guard_is_a_clear_error_within_seconds(tmp_path, guarded):
    head, run = UNGUARDED.split("\nds = ")
    body = head + "\nif __name__ == '__main__':\n" + textwrap.indent("ds = " + run, "    ") if guarded else UNGUARDED
    script = tmp_path / "train.py"
    script.write_text(body)
    t0 = time.monotonic()
    out = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=tmp_path,
    )
    took = time.monotonic() - t0
    if guarded:  # the same script, guarded, runs
        assert out.returncode == 0, out.stderr[-2000:]
        assert out.stdout.split()[-1] == "50"
        return
    assert out.returncode != 0
    last = out.stderr.strip().splitlines()[-1]
    assert "WorkerCrashedError" in last and "operator 'double'" in last
    assert f"Your script {script} has no `if __name__ == \"__main__\":` guard" in last
    assert took < 30, took  # seconds, not a hang (measured 2-3 s)


def test_the_pool_grows_and_shrinks_while_running_without_changing_a_batch():
    with _pipeline() as p:
        expected = [hash_arrays(b.data) for b in p]
    with _pipeline() as p:
        it = iter(p)
        got = [hash_arrays(next(it).data)]
        [ex] = [e for e in p._engine.executors if getattr(e, "_label", "") == "plus_one"]  # type: ignore[union-attr]
        ex.resize(4)
        got += [hash_arrays(next(it).data) for _ in range(20)]
        deadline = time.monotonic() + 10
        while len(ex._ready) < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        grown = [proc.pid for i, proc in enumerate(ex._procs) if i in ex._ready]
        ex.resize(1)
        got += [hash_arrays(b.data) for b in it]
        alive = [proc for proc in ex._procs if proc is not None and proc.is_alive()]
    assert got == expected
    assert len(grown) == 4
    assert len(alive) == 1 and ex.parallelism == 1  # the three retired workers exited
