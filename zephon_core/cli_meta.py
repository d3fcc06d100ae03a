"""``zephon --version`` and ``zephon stubs``: what is installed, and an editor stub that knows it.

A bug report needs the kernel's version and every plugin's, because plugins version separately;
``--version`` prints all of them. ``zephon stubs`` wraps :mod:`zephon_core.stubs` so that a user
gets completion for plugin operators without knowing that module exists.
"""

from __future__ import annotations

import argparse
import sys
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from zephon_core.errors import ConfigError

if TYPE_CHECKING:
    from zephon_core.plugins import ZephonPluginManager

DEFAULT_STUB_FOLDER = "typings"
"""Where ``zephon stubs`` writes by default: pyright's and VS Code's default stub path."""


def kernel_version() -> str:
    """The installed zephon-core version (the source tree's ``__version__`` when not installed)."""
    try:
        return metadata.version("zephon-core")
    except metadata.PackageNotFoundError:
        from zephon_core import __version__

        return __version__


def plugin_distributions(plugins: ZephonPluginManager) -> list[tuple[str, str, list[str]]]:
    """``(distribution, version, what it registers)`` for every installed plugin package.

    Two sources, because each misses something: the ``zephon`` entry points (a package that
    registers nothing yet is still installed) and the registry (a plugin object given in code has no
    entry point). The kernel's own built-ins are left out: ``--version`` prints the kernel first.
    """
    from zephon_core.hookspecs import PROJECT

    found: dict[str, tuple[str, list[str]]] = {}
    for dist in metadata.distributions():
        if any(ep.group == PROJECT for ep in dist.entry_points):
            found.setdefault(dist.metadata["name"], (dist.version, []))
    for row in plugins.listing():
        if row["package"] == "zephon-core":
            continue
        _, provided = found.setdefault(row["package"], (row["version"], []))
        provided.append(f"{row['kind']} {row['name']}")
    return [(name, version, provided) for name, (version, provided) in sorted(found.items())]


def version(plugins: ZephonPluginManager) -> int:
    """Print the kernel's version, then one line per plugin distribution."""
    print(f"zephon-core {kernel_version()}")
    for name, ver, provided in plugin_distributions(plugins):
        what = ", ".join(provided) if provided else "registers nothing"
        print(f"  {name} {ver}: {what}")
    return 0


def stubs(args: argparse.Namespace, plugins: ZephonPluginManager) -> int:
    """Write the Pipeline stub package under ``-o`` (default ``./typings``), or print it with ``-o -``."""
    from zephon_core.stubs import pipeline_stub, write_stubs

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
    print(f"point your editor's stub path at {folder} (pyright and VS Code look in ./typings by default)")
    return 0
