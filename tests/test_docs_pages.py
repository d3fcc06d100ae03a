"""The examples of docs/shuffling.md and docs/curricula.md run as written and check their own claims.

Each page's ``python`` blocks run in order in one namespace (a later block may use an earlier one's
names), in a fresh interpreter so nothing of the test session leaks in.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _code(page: str) -> str:
    text = (ROOT / "docs" / page).read_text()
    return "\n".join(re.findall(r"```python\n(.*?)```", text, flags=re.S))


@pytest.mark.parametrize("page", ["shuffling.md", "curricula.md"])
def test_page_examples_run(page, tmp_path):
    code = _code(page)
    assert code.strip(), f"{page} has no python examples"
    script = tmp_path / "example.py"
    script.write_text(code)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), *sys.path]))
    run = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]


def test_documented_report_lines_are_what_the_code_prints(tmp_path):
    """The commented output of the exhaustion example is the real output."""
    text = (ROOT / "docs" / "curricula.md").read_text()
    block = next(b for b in re.findall(r"```python\n(.*?)```", text, flags=re.S) if "exhaustion_report" in b)
    expected = [line[2:] for line in block.splitlines() if line.startswith("# dataset")]
    setup = next(b for b in re.findall(r"```python\n(.*?)```", text, flags=re.S) if "MixtureSchedule(" in b)
    script = tmp_path / "report.py"
    script.write_text(setup.split("schedule = ")[0] + block)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), *sys.path]))
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.splitlines() == expected
