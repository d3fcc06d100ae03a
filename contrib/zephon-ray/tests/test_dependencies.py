"""The package imports only what it declares, and only public names of the kernel.

A shared development environment hides a missing dependency; installing the package alone into a
fresh environment takes about a minute here (Ray's wheel is large), so the same guarantee is checked
from the source: every import is the standard library, ``ray``, ``zephon_core`` (public modules
only) or the package itself.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1]
SOURCES = sorted((PACKAGE / "src" / "zephon_ray").glob("*.py"))


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def test_every_import_is_declared():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    declared = tomllib.loads((PACKAGE / "pyproject.toml").read_text())["project"]["dependencies"]
    dists = {d.split(">")[0].split("<")[0].split("=")[0].split("~")[0].strip().replace("-", "_") for d in declared}
    assert dists == {"zephon_core", "ray"}
    allowed = set(sys.stdlib_module_names) | dists | {"zephon_ray"}
    for path in SOURCES:
        undeclared = {n for n in _imports(path) if n.split(".")[0] not in allowed}
        assert not undeclared, f"{path.name} imports {sorted(undeclared)}, which pyproject.toml does not declare"


def test_only_public_kernel_modules():
    for path in SOURCES:
        private = {
            n for n in _imports(path) if n.startswith("zephon_core") and any(p.startswith("_") for p in n.split("."))
        }
        assert not private, f"{path.name} imports private kernel modules {sorted(private)}"


def test_ray_is_imported_lazily():
    """Modules loaded with the plugin (at every plugin scan) must not import Ray at module level."""
    for name in ("__init__.py", "plugin.py", "runner.py", "options.py", "errors.py"):
        tree = ast.parse((PACKAGE / "src" / "zephon_ray" / name).read_text())
        top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        mods = {a.name for n in top if isinstance(n, ast.Import) for a in n.names}
        mods |= {n.module for n in top if isinstance(n, ast.ImportFrom) and n.module}
        assert not {
            m for m in mods if m.split(".")[0] == "ray" or m in ("zephon_ray.executor", "zephon_ray.connect")
        }, name
