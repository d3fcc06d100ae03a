"""The examples in the documentation run as written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _blocks(page: str, tag: str) -> list[str]:
    text = (ROOT / "docs" / page).read_text()
    return re.findall(rf"```{re.escape(tag)}\n(.*?)```", text, flags=re.S)


@pytest.mark.slow  # the whole conformance suite on both examples, in a fresh interpreter
def test_writing_an_operator_examples_run_and_pass_the_suite(tmp_path):
    code = "\n".join(_blocks("writing-an-operator.md", "python"))
    assert "class Subsample" in code and "stateful_transform" in code
    (tmp_path / "doc_example.py").write_text(code)
    (tmp_path / "test_doc_example.py").write_text(_blocks("writing-an-operator.md", "python conformance-test")[0])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), *sys.path]))
    env.pop("PYTEST_ADDOPTS", None)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--zephon-examples=2", "--rootdir", str(tmp_path),
         str(tmp_path / "test_doc_example.py")],
        cwd=tmp_path, capture_output=True, text=True, timeout=900, env=env,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert re.search(r"\d+ passed", run.stdout)
