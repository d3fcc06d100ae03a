"""The default plugins: the kernel's built-in operators, work sources and memory reader.

Each is a module of this package whose ``@hookimpl`` functions register lazy ``"module:attr"``
factories, registered first and credited to zephon-core. A non-essential one can be blocked like any
plugin (``ZephonPluginManager(block=["zephon_core.defaults.operators"])``), as if uninstalled:

* :mod:`zephon_core.defaults.memory` — the ``memory`` reader behind ``Dataset.from_records``. **Essential**.
* :mod:`zephon_core.defaults.sources` — the static mixture work source and its parts. **Essential**:
  ``Pipeline(datasets)`` builds it; it registers no entry, but is listed so it cannot be blocked.
* :mod:`zephon_core.defaults.operators` — ``map_transform``, ``flat_map``, ``stateful_transform``,
  ``decode_text`` and ``shuffle``.
* :mod:`zephon_core.defaults.observers` — the ``metrics`` observer.

The runners and the ``zephon plugins`` / ``zephon demo`` commands are registered by
:mod:`zephon_core._kernel`, which cannot be blocked either."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any, Literal

from zephon_core.errors import PluginError
from zephon_core.hookspecs import KINDS, Kind

DEFAULT_PLUGINS: tuple[str, ...] = (
    "zephon_core.defaults.memory",
    "zephon_core.defaults.sources",
    "zephon_core.defaults.operators",
    "zephon_core.defaults.observers",
)
"""The default plugin modules, in the order the plugin manager registers them (after the kernel's own)."""

ESSENTIAL: tuple[str, ...] = ("zephon_core.defaults.memory", "zephon_core.defaults.sources")
"""The defaults the kernel cannot run without: blocking one is refused (see the module docstring for why)."""

KERNEL = "zephon_core._kernel"
"""The kernel's own registrations (runners and commands): parts of the kernel, never blockable."""

Role = Literal["essential", "default"]


def check_block(block: Iterable[str]) -> tuple[str, ...]:
    """The plugin names in ``block``, refusing the essential defaults and the kernel's own registrations.

    Raises:
        PluginError: a name is not a string, or names an essential default, the kernel's own
            registrations or this package."""
    names = (block,) if isinstance(block, str) else tuple(block)
    for name in names:
        if not isinstance(name, str):
            raise PluginError(f"block= takes plugin names (strings), got {name!r}")
        if name in ESSENTIAL or name == __name__:
            what = "holds the essential default plugins" if name == __name__ else "is an essential default plugin"
            raise PluginError(f"plugin {name!r} cannot be blocked: it {what} (see {__name__})")
        if name == KERNEL:
            raise PluginError(f"plugin {name!r} cannot be blocked: it holds the kernel's own runners and commands")
    return names


def plugins() -> list[ModuleType]:
    """The default plugin modules, in registration order (their hook modules only: nothing heavy)."""
    return [importlib.import_module(name) for name in DEFAULT_PLUGINS]


def provided(plugin: ModuleType) -> list[tuple[Kind, str]]:
    """What a default plugin registers, as ``(kind, name)``, by calling its hooks with a recorder."""
    out: list[tuple[Kind, str]] = []
    for kind in KINDS:
        hook = getattr(plugin, f"zephon_register_{kind}s", None)
        if hook is not None:
            hook(register=_recorder(kind, out))
    return out


def _recorder(kind: Kind, out: list[tuple[Kind, str]]) -> Callable[..., None]:
    def record(**registration: Any) -> None:
        out.append((kind, registration["name"]))

    return record


def roles() -> dict[tuple[str, str], Role]:
    """``(kind, name) -> "essential" | "default"`` for each entry a default plugin registers."""
    return {
        entry: ("essential" if plugin.__name__ in ESSENTIAL else "default")
        for plugin in plugins()
        for entry in provided(plugin)
    }
