"""Kernel modules whose contents moved to a distribution of their own, resolved there lazily.

0.1.0's ``zephon_core.work.scheduled`` and ``.schedule`` live in zephon-curricula now, ``zephon_core.storage``
in zephon-storage, ``zephon_core.demo`` in zephon-demo. Scripts (and 0.1.0 demo fingerprints) name
them, so each stays a few lines that look every name up in its new home on first use (module
``__getattr__``); the kernel neither imports nor needs it: without it, using a name is a
:class:`~zephon_core.errors.PluginError` saying what to install. The default plugins' former 0.1.0
modules (``zephon_core.ops.mapping``, ``zephon_core.work.source``, ...) forward the same way (:data:`CORE`)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from zephon_core.errors import PluginError

CURRICULA = "zephon-curricula"
"""The distribution that holds scheduled mixtures (:mod:`zephon_curricula`)."""

CORE = "zephon-core"
"""The kernel itself: the home of the default plugins (:mod:`zephon_core.defaults`), always installed."""


def home(former: str, target: str, package: str, missing: str | None = None) -> ModuleType:
    """Import ``target`` (the new home of module ``former``); an error naming ``package`` if it is missing,
    led by ``missing`` (default: "``former`` moved to <top package>")."""
    top = target.partition(".")[0]
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as exc:
        if exc.name not in (top, target):  # the package is there but something it imports is not: that is the news
            raise
        from zephon_core.plugins import install_hint

        raise PluginError(f"{missing or f'{former} moved to {top}'}: {install_hint(package)}") from None


def resolve(
    former: str,
    target: str,
    package: str,
    name: str,
    namespace: dict[str, Any],
    *,
    missing: str | None = None,
    see: str | None = None,
) -> Any:
    """Module ``former``'s ``name``, looked up in ``target`` and kept in ``namespace`` for the next use;
    ``see`` ends the error for a name the new home lacks (default: "it moved to ``target``")."""
    if name.startswith("__"):
        raise AttributeError(name)
    try:
        value = getattr(home(former, target, package, missing), name)
    except AttributeError:
        raise AttributeError(
            f"module {former!r} has no attribute {name!r} ({see or f'it moved to {target}'})"
        ) from None
    namespace[name] = value
    return value


def forward(former: str, target: str, package: str = CORE) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``former`` that finds each name in ``target`` (see :func:`resolve`):
    a forwarding module is then its docstring and ``__getattr__ = forward(__name__, "new.home")``."""

    def lookup(name: str) -> Any:
        return resolve(former, target, package, name, sys.modules[former].__dict__)

    return lookup
