"""The documentation site builds with ``mkdocs build --strict``: no broken link between the guides, no
page missing from the navigation, and every ``::: zephon_core...`` reference renders from the code."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # ~10 s of CPU, longer on a loaded machine (mkdocstrings imports and renders the API)
def test_mkdocs_build_strict(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings_handlers.python")
    mkdocs = shutil.which("mkdocs", path=os.path.dirname(sys.executable)) or shutil.which("mkdocs")
    assert mkdocs, "mkdocs is importable but its command is not on PATH"
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    run = subprocess.run(
        [mkdocs, "build", "--strict", "--quiet", "-f", str(ROOT / "mkdocs.yml"), "-d", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    assert (tmp_path / "site" / "reference" / "pipeline" / "index.html").is_file()


def test_every_page_is_in_the_navigation() -> None:
    """A guide added to docs/ also goes into mkdocs.yml's nav (the build reports an omitted page too,
    but this check is instant and names the file)."""
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = sorted(p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md"))
    missing = [p for p in pages if f" {p}" not in nav]
    assert missing == [], f"add these pages to the nav in mkdocs.yml: {missing}"
