"""``zephon stubs`` from the command line: the command this package registers, writing and printing the stub."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from zephon_core import plugins as plugins_module
from zephon_core.cli import build_parser
from zephon_core.plugins import default_plugin_manager, entrypoint_plugins
from zephon_core.testing.cli import run_cli


def test_stubs_writes_a_parsable_stub_with_plugin_operators(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli("stubs")
    assert code == 0, err
    path = tmp_path / "typings" / "zephon_core" / "pipeline.pyi"
    assert f"wrote {Path('typings') / 'zephon_core' / 'pipeline.pyi'}" in out
    tree = ast.parse(path.read_text())
    assert (tmp_path / "typings" / "zephon_core" / "__init__.pyi").exists()
    code, printed, _ = run_cli("stubs", "-o", "-")
    assert code == 0 and printed == path.read_text()
    if "tokenize" not in default_plugin_manager().registry.names("operator"):
        pytest.skip("zephon-tokenize is not installed")
    assert "tokenize" in out
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Pipeline")
    method = next(f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "tokenize")
    names = {a.arg for a in method.args.args + method.args.kwonlyargs}
    assert {"tokenizer_id", "field", "parallelism"} <= names


def test_stubs_into_another_folder_and_not_onto_a_file(tmp_path: Path) -> None:
    code, _, _ = run_cli("stubs", "-o", str(tmp_path / "stubs"))
    assert code == 0 and (tmp_path / "stubs" / "zephon_core" / "pipeline.pyi").exists()
    (tmp_path / "afile").write_text("")
    code, _, err = run_cli("stubs", "-o", str(tmp_path / "afile"))
    assert code == 2 and err.count("\n") == 1 and "is a file" in err


def test_the_command_is_this_packages_and_without_it_zephon_names_the_package(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert "stubs: from zephon-stubs 0.1.0" in build_parser().format_help()
    scan = entrypoint_plugins()
    assert any(ep.package == "zephon-stubs" for ep in scan), "zephon-stubs is not installed"
    monkeypatch.setattr(plugins_module, "_scan", tuple(ep for ep in scan if ep.package != "zephon-stubs"))
    code, _, err = run_cli("stubs")
    assert code == 2 and err.count("\n") == 1, err
    assert "the command 'stubs' is not installed" in err and "pip install -e contrib/zephon-stubs" in err
