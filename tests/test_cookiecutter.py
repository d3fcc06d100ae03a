"""The plugin template: render both kinds, install into an isolated environment, pass the suite,
then break a rule in the generated operator and watch its own tests fail naming that rule."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from zephon_core.testing.isolated import build_wheels, new_venv, pip_install

ROOT = Path(__file__).resolve().parents[1]


def _run(cmd: list[str], cwd: Path | None = None, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "VIRTUAL_ENV"))}
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


@pytest.mark.slow
def test_template_round_trip(tmp_path):
    cookiecutter = pytest.importorskip("cookiecutter.main")
    out = tmp_path / "out"
    for kind in ("operator", "reader"):
        cookiecutter.cookiecutter(str(ROOT / "cookiecutter"), no_input=True, output_dir=str(out), extra_context={"kind": kind})
    op_pkg, reader_pkg = out / "zephon-dedupe", out / "zephon-csv"
    assert (op_pkg / ".github/workflows/ci.yml").exists() and (reader_pkg / "src/zephon_csv/reader.py").exists()
    assert not (op_pkg / "src/zephon_dedupe/reader.py").exists()

    # a bare venv that this interpreter's pip fills with wheels built here (see zephon_core.testing.isolated)
    python = new_venv(tmp_path / "venv")
    py = str(python)
    kernel, op_whl, reader_whl = build_wheels([ROOT, op_pkg, reader_pkg], tmp_path / "wheels")
    res = _run([*pip_install(python), f"{kernel}[testing]", str(op_whl), str(reader_whl)])
    assert res.returncode == 0, res.stderr[-3000:]

    for pkg in (op_pkg, reader_pkg):
        res = _run([py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--zephon-examples=2"], cwd=pkg)
        assert res.returncode == 0, f"{pkg.name}:\n{res.stdout[-4000:]}\n{res.stderr[-2000:]}"
        assert " passed" in res.stdout

    # Break rule 3 in the installed operator: randomness from the global generator.
    src = op_pkg / "src/zephon_dedupe/operator.py"
    text = src.read_text()
    broken = text.replace(
        "        return {**payload, self.field: cleaned}",
        "        import random\n\n        return {**payload, self.field: cleaned, \"noise\": random.random()}",
    )
    assert broken != text
    src.write_text(broken)
    (op_whl,) = build_wheels([op_pkg], tmp_path / "wheels-broken")
    res = _run([*pip_install(python), "--force-reinstall", "--no-deps", str(op_whl)])
    assert res.returncode == 0, res.stderr[-2000:]
    res = _run([py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--zephon-examples=2", "-rf",
                "-k", "global_random_state or parallelism"], cwd=op_pkg)
    assert res.returncode != 0
    assert "[rule 3: randomness comes from the data]" in res.stdout, res.stdout[-4000:]
