"""Errors of the torch integration.

Configuration and checkpoint faults reuse the kernel's :class:`~zephon_core.ConfigError` and
:class:`~zephon_core.CheckpointError`, so a training script can keep catching one family
(:class:`~zephon_core.ZephonError`). The one new kind of fault is another rank going away, which
only exists once there are real processes.
"""

from __future__ import annotations

from zephon_core import ZephonError


class RankFailureError(ZephonError, RuntimeError):
    """A data-parallel collective of the loader failed or timed out, or a peer rank reported an error.

    Raised on every surviving rank instead of hanging, so a job can exit and be restarted from
    its last checkpoint on the ranks that remain.
    """
