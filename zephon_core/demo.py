"""The kernel demo under its 0.1.0 name: it lives in zephon-demo now, as :mod:`zephon_demo.kernel`.

Scripts written against 0.1.0 import ``build``, ``make_source``, ``to_bytes``, ``concat_*``, ...
from here, and 0.1.0 checkpoints name those functions ``zephon_core.demo:...`` in their
fingerprints. Each name is looked up lazily in :mod:`zephon_demo.kernel` (through
:mod:`zephon_core.work.moved`); the kernel does not depend
on it, and without zephon-demo installed, using a name here is an error saying what to install.
New code imports ``zephon_demo.kernel`` directly.
"""

from __future__ import annotations

from typing import Any

from zephon_core.work.moved import home, resolve

PACKAGE = "zephon-demo"
"""The distribution that provides :mod:`zephon_demo.kernel`."""
MODULE = "zephon_demo.kernel"
MISSING = "zephon_core.demo is the kernel demo of zephon-demo now"


def __getattr__(name: str) -> Any:
    return resolve(__name__, MODULE, PACKAGE, name, globals(), missing=MISSING, see=f"see {MODULE}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | {n for n in vars(home(__name__, MODULE, PACKAGE, MISSING)) if not n.startswith("_")})
