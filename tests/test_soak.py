"""A soak of a processes pipeline: RSS, open files, threads and children stay flat.

24 seconds (thousands of batches, dozens of epochs and flush windows) with the RSS slack scaled to
the run: the same leak rate fails it as fails a minute with the default 64 MiB, and a leaked file,
thread or child process fails it at the first window or epoch that leaks one.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_resources_stay_flat() -> None:
    out = subprocess.run(
        [sys.executable, "benchmarks/soak.py", "--seconds", "24", "--every", "4", "--rss-slack", "24", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "flat after warm-up" in out.stdout


def test_the_flatness_check_can_fail():
    spec = importlib.util.spec_from_file_location("soak", ROOT / "benchmarks" / "soak.py")
    assert spec is not None and spec.loader is not None
    soak = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(soak)
    base = {"rss": 100 * 2**20, "fds": 10, "threads": 8, "children": 2, "batches": 1}
    assert soak.flat([base, dict(base, batches=2)]) == []
    assert soak.flat([base, dict(base, fds=11)]) == ["fds grew from 10 to 11"]
    assert "RSS grew" in soak.flat([base, dict(base, rss=400 * 2**20)])[0]
    assert soak.flat([base, dict(base, rss=130 * 2**20)]) == []  # under the default 64 MiB slack
    assert "RSS grew" in soak.flat([base, dict(base, rss=130 * 2**20)], rss_slack_mib=24)[0]
