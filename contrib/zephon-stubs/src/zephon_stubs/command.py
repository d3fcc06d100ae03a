"""The body of ``zephon stubs`` (its parser is declared in :mod:`zephon_stubs.plugin`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from zephon_core import ConfigError
from zephon_stubs.generate import pipeline_stub, write_stubs

if TYPE_CHECKING:
    from zephon_core.plugin_api import ZephonPluginManager

DEFAULT_FOLDER = "typings"
"""Where ``zephon stubs`` writes by default: pyright's and VS Code's default stub path."""


def main(args: argparse.Namespace, plugins: ZephonPluginManager) -> int:
    """Write the stub package under ``-o`` (default ``./typings``), or print ``pipeline.pyi`` with ``-o -``.

    Raises:
        ConfigError: ``-o`` names a file, or the folder cannot be written.
    """
    operators = [
        n for n in plugins.registry.names("operator") if plugins.registry.get("operator", n).package != "zephon-core"
    ]
    if args.output == "-":
        sys.stdout.write(pipeline_stub(plugins))
        return 0
    folder = Path(args.output)
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"{folder} is a file; -o takes the folder to write the stub package into")
    try:
        path = write_stubs(folder, plugins)
    except OSError as exc:
        raise ConfigError(f"cannot write stubs under {folder}: {exc}") from exc
    names = ", ".join(operators) if operators else "none installed"
    print(f"wrote {path} (plugin operators: {names})")
    print(f"point your editor's stub path at {folder} (pyright and VS Code look in ./{DEFAULT_FOLDER} by default)")
    return 0
