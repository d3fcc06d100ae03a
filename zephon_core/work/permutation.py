"""``zephon_core.work.permutation``, 0.1.0's path of :mod:`zephon_core.defaults.sources.permutation` (a default plugin now; see :mod:`zephon_core.work.moved`)."""

from zephon_core.work.moved import forward

__getattr__ = forward(__name__, "zephon_core.defaults.sources.permutation")
