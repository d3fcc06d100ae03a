"""``zephon --version``: the kernel's version and every installed plugin's.

A bug report needs the kernel's version and every plugin's, because plugins version separately;
``--version`` prints all of them.
"""

from __future__ import annotations

from importlib import metadata
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from zephon_core.plugins import ZephonPluginManager


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
