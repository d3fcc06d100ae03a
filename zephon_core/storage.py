"""The storage toolkit for readers, under its former kernel name: it lives in zephon-storage now.

``zephon_core.storage`` was part of the plugin contract (its ``__all__``), so a reader written
against it keeps working: each name is looked up lazily in :mod:`zephon_storage`, the distribution
that holds the toolkit (``FileReader``, ``Storage``, manifests, sidecar indexes, ...), through
:mod:`zephon_core.work.moved`. The kernel does not depend on it; without it installed, using a name
here is an error saying what to install. New code imports ``zephon_storage`` directly.
"""

from __future__ import annotations

from typing import Any

from zephon_core.work.moved import home, resolve

PACKAGE = "zephon-storage"
"""The distribution that provides :mod:`zephon_storage`."""
MISSING = "zephon_core.storage needs the storage toolkit"


def __getattr__(name: str) -> Any:
    return resolve(
        __name__, "zephon_storage", PACKAGE, name, globals(), missing=MISSING, see="see zephon_storage.__all__"
    )


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(home(__name__, "zephon_storage", PACKAGE, MISSING).__all__))
