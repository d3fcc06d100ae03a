"""The kernel demo under its 0.1.0 name: it lives in zephon-demo now, as :mod:`zephon_demo.kernel`.

Scripts written against 0.1.0 import ``build``, ``make_source``, ``to_bytes``, ``concat_*``, ...
from here, and 0.1.0 checkpoints name those functions ``zephon_core.demo:...`` in their
fingerprints. Each name is looked up lazily in :mod:`zephon_demo.kernel`; the kernel does not depend
on it, and without zephon-demo installed, using a name here is an error saying what to install.
New code imports ``zephon_demo.kernel`` directly.
"""

from __future__ import annotations

import importlib
from typing import Any

from zephon_core.errors import PluginError

PACKAGE = "zephon-demo"
"""The distribution that provides :mod:`zephon_demo.kernel`."""
MODULE = "zephon_demo.kernel"


def _demo() -> Any:
    try:
        return importlib.import_module(MODULE)
    except ModuleNotFoundError as exc:
        if exc.name not in ("zephon_demo", MODULE):
            raise
        from zephon_core.plugins import install_hint

        raise PluginError(f"zephon_core.demo is the kernel demo of zephon-demo now: {install_hint(PACKAGE)}") from None


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    demo = _demo()
    try:
        value = getattr(demo, name)
    except AttributeError:
        raise AttributeError(f"module 'zephon_core.demo' has no attribute {name!r} (see {MODULE})") from None
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | {n for n in vars(_demo()) if not n.startswith("_")})
