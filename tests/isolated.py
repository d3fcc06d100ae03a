"""Install one plugin into a fresh virtual environment with only its declared dependencies.

One shared environment hides a missing dependency (another package happens to bring it), so each
plugin is also tested alone: ``python -m venv``, ``pip install <repo>`` (the kernel and its own
dependencies), ``pip install plugins/<name>``, then a script run by that environment's Python.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(cmd: list[str], timeout: float) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
    return proc.stdout


def install_alone(plugin: str, where: Path, timeout: float = 400) -> Path:
    """A fresh venv under ``where`` with the kernel and ``plugins/<plugin>``; returns its python."""
    venv = where / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], timeout)
    python = venv / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    _run([*pip, str(ROOT)], timeout)
    _run([*pip, str(ROOT / "plugins" / plugin)], timeout)
    return python


def run_script(python: Path, script: str, cwd: Path, timeout: float = 120) -> str:
    """Run ``script`` with ``python`` in ``cwd`` (not the repository, so nothing leaks onto sys.path)."""
    path = cwd / "check_alone.py"
    path.write_text(script)
    return _run([str(python), str(path)], timeout)


def installed(python: Path) -> set[str]:
    """Distribution names installed in that environment (lower case)."""
    out = _run([str(python), "-m", "pip", "list", "--format=freeze", "--disable-pip-version-check"], 60)
    return {line.split("==")[0].lower() for line in out.splitlines() if "==" in line}
