"""zephon-stubs installed alone, with only its declared dependency (zephon-core), in a fresh virtual
environment: ``zephon stubs`` is there and writes a stub package that parses."""

from __future__ import annotations

from pathlib import Path

import pytest
from zephon_testkit.isolated import check_alone

SCRIPT = r"""
import ast, io, sys, tempfile
from contextlib import redirect_stdout
from pathlib import Path
from zephon_core.cli import main

d = Path(tempfile.mkdtemp())
out = io.StringIO()
with redirect_stdout(out):
    assert main(["stubs", "-o", str(d)]) == 0
assert "plugin operators: none installed" in out.getvalue(), out.getvalue()
tree = ast.parse((d / "zephon_core" / "pipeline.pyi").read_text())
cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Pipeline")
assert {"map_transform", "shuffle", "batch"} <= {f.name for f in cls.body if isinstance(f, ast.FunctionDef)}
ast.parse((d / "zephon_core" / "__init__.pyi").read_text())
print("ALONE OK")
"""


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_installed_alone(tmp_path: Path) -> None:
    python = check_alone("zephon-stubs", tmp_path, SCRIPT, absent={"pyarrow", "torch", "zephon-storage"})
    assert python.exists()
