"""A hung worker never hangs the job: every runner ends in an OperatorTimeoutError within the timeout
(plus polling slack), ``close()`` returns promptly, and a script interrupted with Ctrl-C exits."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests import helpers
from zephon_core import ConfigError, Dataset, Pipeline, StaticMixtureWorkSource
from zephon_core.errors import OperatorTimeoutError

ROOT = Path(__file__).resolve().parents[1]


def _pipeline(runner: str, timeout: float | None = 1.0, *, via_option: bool = False) -> Pipeline:
    ds = Dataset.from_records("n", [{"i": i} for i in range(200)], shard_size=50)
    ws = StaticMixtureWorkSource([ds], chunk_size=16, shuffle=False)
    p = Pipeline(ws)
    if via_option:
        p = p.map_transform(helpers.hang_on_seven, parallelism=2).batch(4).options(runner=runner, timeout_s=timeout)
    else:
        p = p.map_transform(helpers.hang_on_seven, parallelism=2, timeout_s=timeout).batch(4).options(runner=runner)
    return p


@pytest.mark.parametrize("runner", ["inline", "threads", "processes"])
def test_a_hung_task_fails_within_its_timeout_on_every_runner(runner):
    p = _pipeline(runner)
    t0 = time.monotonic()
    with pytest.raises(OperatorTimeoutError) as err:
        for _ in p:
            pass
    waited = time.monotonic() - t0
    t1 = time.monotonic()
    p.close()
    closed = time.monotonic() - t1
    msg = str(err.value)
    assert "operator 'hang_on_seven'" in msg and f"runner {runner}" in msg and "timeout_s=1" in msg
    assert "samples n[shard 0 (memory-00000), index 0]" in msg, msg  # the task's samples (index 7 is among them)
    startup = 3.0 if runner == "processes" else 0.0
    assert waited < 1.0 + 1.0 + startup, waited
    assert closed < 5.0, closed


def test_the_pipeline_option_sets_the_default_timeout():
    p = _pipeline("threads", 0.5, via_option=True)
    with pytest.raises(OperatorTimeoutError, match=r"timeout_s=0\.5"), p:
        list(p)


def test_timeouts_are_validated():
    with pytest.raises(ConfigError, match="timeout_s"):
        _pipeline("threads", -1)
    with pytest.raises(ConfigError, match="timeout_s"):
        _pipeline("threads", 1.0).options(timeout_s="soon")


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.slow
@pytest.mark.parametrize("runner", ["threads", "processes"])
def test_ctrl_c_exits_a_script_blocked_on_a_hung_worker(runner, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import sys
            sys.path.insert(0, {str(ROOT)!r})
            from tests.test_timeouts import _pipeline

            if __name__ == "__main__":
                p = _pipeline({runner!r}, timeout=None)
                print("started", flush=True)
                with p:
                    for _ in p:
                        pass
            """
        )
    )
    # Ctrl-C as a terminal delivers it: a test run launched in the background of a shell without job
    # control inherits SIGINT ignored, and Python started that way never raises KeyboardInterrupt.
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_default_sigint,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "started"
        time.sleep(2.5 if runner == "processes" else 1.0)  # now blocked in next() on the hung record
        assert proc.poll() is None, "the pipeline should be stuck on the hung record"
        t0 = time.monotonic()
        os.kill(proc.pid, signal.SIGINT)
        proc.wait(timeout=15)
        # 5 s on an idle machine (measured 1-3 s); the bound leaves room for a test running beside it
        assert time.monotonic() - t0 < 8.0
        assert proc.returncode != 0 and "KeyboardInterrupt" in (proc.stderr.read() if proc.stderr else "")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
