"""``zephon --version`` and plain-words ``--help`` for every command (``zephon stubs`` is tested with zephon-stubs)."""

from __future__ import annotations

import argparse
from importlib import metadata

import pytest

from zephon_core.cli import build_parser
from zephon_core.plugins import default_plugin_manager
from zephon_core.testing.cli import run_cli


# -- zephon --version ---------------------------------------------------------------------------------
def test_version_lists_the_kernel_and_every_plugin_distribution() -> None:
    code, out, err = run_cli("--version")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == f"zephon-core {metadata.version('zephon-core')}"
    registry = default_plugin_manager().registry
    for fmt in registry.names("reader"):
        reg = registry.get("reader", fmt)
        if reg.package != "zephon-core":
            assert f"  {reg.package} {metadata.version(reg.package)}: " in out
            assert f"reader {fmt}" in out


# -- help ---------------------------------------------------------------------------------------------
def _parsers(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    found = [(path, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += _parsers(sub, (*path, name))
    return found


def test_help_is_plain_words_everywhere() -> None:
    parsers = _parsers(build_parser())
    assert {p for p, _ in parsers} >= {("show",), ("inspect",), ("index",), ("stubs",), ("manifest", "diff")}
    for path, parser in parsers:
        text = parser.format_help()
        for markup in ("``", ":class:", ":func:", ":meth:", ":mod:"):
            assert markup not in text, (path, markup)
        for action in parser._actions:
            if action.dest not in ("help", "command", "action"):
                assert action.help, (path, action.dest)


def test_top_level_help_lists_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    from zephon_core.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    for command in ("plugins", "show", "inspect", "index", "stubs", "demo", "profile", "manifest"):
        assert f"    {command} " in text
    with pytest.raises(SystemExit) as exit_info:
        main([])
    assert exit_info.value.code == 2
    assert "a command is required" in capsys.readouterr().err
