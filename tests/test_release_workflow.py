"""The release workflow builds, checks and publishes every distribution of the repository.

.github/workflows/release.yml lists the packages it builds explicitly (a glob would ship any new
folder unreviewed); these checks make that list complete: a package added under plugins/ or
contrib/ without a line in the workflow fails here, not on PyPI after a release without it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"


def _distributions() -> set[str]:
    """Every folder of the repository with a pyproject.toml that `make dist` builds ("." is the kernel)."""
    return {".", *(p.parent.relative_to(ROOT).as_posix() for p in ROOT.glob("*/*/pyproject.toml")
                   if p.parts[-3] in ("plugins", "contrib"))}


@pytest.fixture(scope="module")
def workflow() -> dict[Any, Any]:
    """release.yml parsed once (safe_load: a workflow holds plain data only)."""
    data = yaml.safe_load(WORKFLOW.read_text())
    assert isinstance(data, dict), f"{WORKFLOW}: not a YAML mapping"
    return data


def _runs(job: dict[str, Any]) -> list[str]:
    return [str(step["run"]) for step in job["steps"] if "run" in step]


def test_runs_on_version_tags(workflow: dict[Any, Any]) -> None:
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as true
    assert triggers == {"push": {"tags": ["v*"]}}, f"{WORKFLOW.name}: triggers {triggers}"


def test_builds_every_distribution(workflow: dict[Any, Any]) -> None:
    build = workflow["jobs"]["build"]
    listed = build["strategy"]["matrix"]["package"]
    assert len(listed) == len(set(listed)), f"{WORKFLOW.name}: a package is listed twice: {listed}"
    missing, unknown = _distributions() - set(listed), set(listed) - _distributions()
    assert not missing, f"{WORKFLOW.name}: jobs.build.strategy.matrix.package does not build {sorted(missing)}"
    assert not unknown, f"{WORKFLOW.name}: jobs.build.strategy.matrix.package lists no package at {sorted(unknown)}"
    runs = _runs(build)
    builds = [i for i, r in enumerate(runs) if re.search(r"python -m build\b.*--outdir dist \"?\$\{\{ matrix\.package \}\}", r)]
    checks = [i for i, r in enumerate(runs) if re.search(r"twine check --strict dist/\*", r)]
    assert builds, f"{WORKFLOW.name}: no step runs `python -m build --outdir dist ${{{{ matrix.package }}}}`: {runs}"
    assert checks and min(checks) > min(builds), f"{WORKFLOW.name}: no `twine check --strict dist/*` after the build: {runs}"
    assert not re.search(r"--(sdist|wheel)\b", runs[builds[0]]), "build both the wheel and the sdist"
    assert any("twine" in r and "pip install" in r for r in runs), f"{WORKFLOW.name}: twine is never installed"


def test_publishes_with_trusted_publishing(workflow: dict[Any, Any]) -> None:
    publish = workflow["jobs"]["publish"]
    assert publish["needs"] == "build" or "build" in publish["needs"]
    env = publish["environment"]
    assert (env["name"] if isinstance(env, dict) else env) == "pypi"
    assert publish["permissions"] == {"id-token": "write"}, publish["permissions"]
    assert workflow.get("permissions") == {"contents": "read"}, "only the publish job may hold more than read access"
    uses = [str(step.get("uses", "")) for step in publish["steps"]]
    assert any(u.startswith("pypa/gh-action-pypi-publish@") for u in uses), uses
    assert any(u.startswith("actions/download-artifact@") for u in uses), uses
    uploads = [s for s in workflow["jobs"]["build"]["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact@")]
    assert uploads and all(s["with"]["path"] in ("dist", "dist/") for s in uploads), uploads


def test_make_dist_checks_what_it_builds() -> None:
    """`make dist` runs the release's `twine check --strict` (a warning fails the release, so it fails
    here too), and twine is a development requirement for it."""
    requirements = (ROOT / "requirements-dev.txt").read_text()
    assert re.search(r"^twine\b", requirements, re.M), "requirements-dev.txt: twine (for `make dist`) is missing"
    target = re.search(r"^dist:.*?\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), re.M)
    assert target, "Makefile: no dist target"
    recipe = target.group(1)
    assert "twine check --strict dist/*" in recipe and recipe.index("twine check") > recipe.index("-m build"), recipe


INSTALL_ZEPHON = re.compile(r"pip install\s+(?:-\S+\s+)*['\"]?zephon(?:\[[^\]]*\])?['\"]?(?=\s|$|`)", re.M)
"""`pip install zephon`, with or without extras: the unrelated reference implementation, unpinned."""


def test_no_page_tells_users_to_pip_install_zephon() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
             *sorted((ROOT / "cookiecutter").rglob("README.md"))]
    found = [f"{p.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
             for p in pages for text in [p.read_text()] for m in INSTALL_ZEPHON.finditer(text)]
    assert not found, "these install the unrelated `zephon` project, not zephon-core:\n" + "\n".join(found)
