"""``MixtureSchedule`` under its 0.1.0 module: it lives in zephon-curricula now.

Every name is looked up lazily in :mod:`zephon_curricula.schedule` (see :mod:`zephon_core.work.moved`).
"""

from __future__ import annotations

from typing import Any

from zephon_core.work.moved import CURRICULA, resolve


def __getattr__(name: str) -> Any:
    return resolve(__name__, "zephon_curricula.schedule", CURRICULA, name, globals())
