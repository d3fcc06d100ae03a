"""The documentation site builds with ``mkdocs build --strict`` and without a single warning: no broken
link between the guides, no page missing from the navigation, and every ``::: zephon_core...``
reference renders from the code (a docstring griffe cannot parse is a warning too).

The build runs without ``--quiet``: that flag raises the log level above WARNING, so the warnings
``--strict`` counts are never emitted and a broken site builds "cleanly". The test also reads the
log itself and fails on any WARNING line, so a warning that some plugin logs outside the count
``--strict`` keeps is caught as well.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_WARNING = re.compile(r"^\s*(?:WARNING|ERROR)\b", flags=re.M)


def build_site(config: Path, site: Path) -> tuple[int, str]:
    """``mkdocs build --strict`` of ``config`` into ``site``: its exit code and its whole log."""
    mkdocs = shutil.which("mkdocs", path=os.path.dirname(sys.executable)) or shutil.which("mkdocs")
    assert mkdocs, "mkdocs is importable but its command is not on PATH"
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    run = subprocess.run(
        [mkdocs, "build", "--strict", "-f", str(config), "-d", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    return run.returncode, run.stdout + run.stderr


def warnings_in(log: str) -> list[str]:
    """The WARNING (and ERROR) lines of a build log."""
    return [line for line in log.splitlines() if _WARNING.match(line)]


@pytest.mark.slow  # ~10 s of CPU, longer on a loaded machine (mkdocstrings imports and renders the API)
def test_mkdocs_build_strict(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings_handlers.python")
    code, log = build_site(ROOT / "mkdocs.yml", tmp_path / "site")
    assert code == 0 and not warnings_in(log), "the docs build warns:\n" + "\n".join(warnings_in(log) or [log[-4000:]])
    assert (tmp_path / "site" / "reference" / "pipeline" / "index.html").is_file()


@pytest.mark.slow  # a few seconds: a fresh mkdocs process
def test_a_warning_fails_the_build_check(tmp_path: Path) -> None:
    """The check itself: a site whose only page links to a missing page is refused, by the exit code
    and by the WARNING line in the log (with ``--quiet`` neither would show)."""
    pytest.importorskip("mkdocs")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text("# Home\n\nSee [the guide](missing.md).\n")
    config = tmp_path / "mkdocs.yml"
    config.write_text("site_name: t\ndocs_dir: docs\nstrict: true\nnav:\n  - index.md\n")
    code, log = build_site(config, tmp_path / "site")
    assert code != 0 and any("missing.md" in line for line in warnings_in(log)), log


def test_every_page_is_in_the_navigation() -> None:
    """A guide added to docs/ also goes into mkdocs.yml's nav (the build reports an omitted page too,
    but this check is instant and names the file)."""
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = sorted(p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md"))
    missing = [p for p in pages if f" {p}" not in nav]
    assert missing == [], f"add these pages to the nav in mkdocs.yml: {missing}"
