"""``ScheduledMixtureWorkSource`` under its 0.1.0 module: it lives in zephon-curricula now.

Every name is looked up lazily in :mod:`zephon_curricula.scheduled` (see :mod:`zephon_core.work.moved`).
Checkpoints do not name this module: the source is fingerprinted by its ``describe()``, whose
``type`` is ``"ScheduledMixtureWorkSource"`` wherever the class lives.
"""

from zephon_core.work.moved import CURRICULA, forward

__getattr__ = forward(__name__, "zephon_curricula.scheduled", CURRICULA)
