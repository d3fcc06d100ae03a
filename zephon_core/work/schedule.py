"""``MixtureSchedule`` under its 0.1.0 module: it lives in zephon-curricula now.

Every name is looked up lazily in :mod:`zephon_curricula.schedule` (see :mod:`zephon_core.work.moved`).
"""

from zephon_core.work.moved import CURRICULA, forward

__getattr__ = forward(__name__, "zephon_curricula.schedule", CURRICULA)
