"""The processes runner starts under a TMPDIR too deep for a Unix socket's path.

The fork server listens on a Unix socket in multiprocessing's temp folder, under TMPDIR, and a
socket path holds at most 107 bytes: CI runners and pytest put TMPDIR deep enough to pass that.
The runner must then place the socket in a short system folder (as Python 3.13 does by itself)
and give the same batches as the inline runner.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = """
from zephon_core import Dataset, MixtureSpec, Pipeline, StaticMixtureWorkSource, hash_arrays

def double(r):
    return {"x": r["x"] * 2}

def run(runner):
    ws = StaticMixtureWorkSource(
        [Dataset.from_records("d", [{"x": i} for i in range(256)], 64)], mixture=MixtureSpec({"d": 1.0}), chunk_size=32, seed=1
    )
    with Pipeline(ws).map_transform(double, parallelism=2).batch(16).options(lanes=2, runner=runner) as p:
        return [hash_arrays(b.to_training()) for _, b in zip(range(12), p)]

if __name__ == "__main__":
    assert run("processes") == run("inline")
    print("SAME")
"""


@pytest.mark.slow
def test_workers_start_under_a_deep_tmpdir(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    assert len(str(deep)) + len("/pymp-XXXXXXXX/listener-XXXXXXXX") > 107
    script = tmp_path / "deep_tmpdir.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, TMPDIR=str(deep))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "SAME" in out.stdout
