"""Every distribution ships a ``py.typed`` marker, declared as package data so it lands in the wheel.

Without the marker, type checkers treat an installed zephon package as untyped and ignore its
annotations (PEP 561).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[1]
PYPROJECTS = [
    ROOT / "pyproject.toml",
    *sorted(ROOT.glob("plugins/*/pyproject.toml")),
    *sorted(ROOT.glob("contrib/*/pyproject.toml")),
]


def _package_dir(pyproject: Path) -> tuple[str, Path]:
    if pyproject.parent == ROOT:
        return "zephon_core", ROOT / "zephon_core"
    (pkg,) = [p for p in (pyproject.parent / "src").iterdir() if p.is_dir() and (p / "__init__.py").exists()]
    return pkg.name, pkg


@pytest.mark.parametrize("pyproject", PYPROJECTS, ids=lambda p: p.parent.name if p.parent != ROOT else "zephon-core")
def test_distribution_ships_py_typed(pyproject: Path) -> None:
    name, pkg = _package_dir(pyproject)
    assert (pkg / "py.typed").is_file(), f"{pkg}/py.typed is missing"
    config = tomllib.loads(pyproject.read_text())
    package_data = config.get("tool", {}).get("setuptools", {}).get("package-data", {})
    assert "py.typed" in package_data.get(name, []), (
        f"{pyproject}: [tool.setuptools.package-data] {name} lacks py.typed"
    )
