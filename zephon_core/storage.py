"""The storage toolkit for readers, under its former kernel name: it lives in zephon-storage now.

``zephon_core.storage`` was part of the plugin contract (its ``__all__``), so a reader written
against it keeps working: each name is looked up lazily in :mod:`zephon_storage`, the distribution
that holds the toolkit (``FileReader``, ``Storage``, manifests, sidecar indexes, ...). The kernel
does not depend on it; without it installed, using a name here is an error saying what to install.
New code imports ``zephon_storage`` directly.
"""

from __future__ import annotations

import importlib
from typing import Any

from zephon_core.errors import PluginError

PACKAGE = "zephon-storage"
"""The distribution that provides :mod:`zephon_storage`."""


def _toolkit() -> Any:
    try:
        return importlib.import_module("zephon_storage")
    except ModuleNotFoundError as exc:
        if exc.name != "zephon_storage":
            raise
        from zephon_core.plugins import install_hint

        raise PluginError(f"zephon_core.storage needs the storage toolkit: {install_hint(PACKAGE)}") from None


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    toolkit = _toolkit()
    try:
        value = getattr(toolkit, name)
    except AttributeError:
        raise AttributeError(f"module 'zephon_core.storage' has no attribute {name!r} (see zephon_storage.__all__)") from None
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(getattr(_toolkit(), "__all__", ())))
