"""Curricula for Zephon: mixtures whose weights follow a schedule and that the trainer may steer.

The distribution zephon-curricula, a default plugin of the kernel (the kernel does not depend on
it, and ``from zephon_core import ScheduledMixtureWorkSource, MixtureSchedule`` resolves these names
here, lazily, so 0.1.0 scripts and checkpoints keep working unchanged). Guide: *Curricula* in the
documentation.

Public names:

* :class:`MixtureSchedule` — weights per dataset at breakpoints of progress, in samples or in
  tokens, held between breakpoints or moved linearly (:mod:`zephon_curricula.schedule`).
* :class:`ScheduledMixtureWorkSource` — the work source that mixes by a schedule, lane by lane, and
  takes trainer-steered updates (``Pipeline.update_mixture``) at a position every rank computes
  alike (:mod:`zephon_curricula.scheduled`; the draw counts come from
  :mod:`zephon_curricula.quota`).
* :func:`check_weights` — the validation of a ``{dataset: weight}`` dict both use.
"""

from __future__ import annotations

from zephon_curricula.schedule import MixtureSchedule, check_weights
from zephon_curricula.scheduled import ScheduledMixtureWorkSource

__version__ = "0.1.0"

__all__ = ["MixtureSchedule", "ScheduledMixtureWorkSource", "__version__", "check_weights"]
