"""Steering a run from the training loop: a new mixture from a global step on, or skipped global steps. Both take
effect at a function of the global step only and are checkpointed, so a resumed run steers like the uninterrupted one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from zephon_core.checkpoint.replay import LaneStart
from zephon_core.defaults.sources.steering import effect_chunks
from zephon_core.errors import ConfigError
from zephon_core.work.contract import Steerable

if TYPE_CHECKING:
    from zephon_core.pipeline import Shared
else:
    Shared = object


class Steering(Shared):
    """Trainer-steered mixtures and deterministic skips (see the module docstring)."""

    def update_mixture(self, weights: Mapping[str, float]) -> None:
        """Change the mixture from now on; call it at the same global step on every rank.

        Each lane applies them from the window ``update_lead_windows`` after the one it resumes from, so any runner or
        world size sees the same batches. Needs a ``ScheduledMixtureWorkSource``, windows and a call between rounds."""
        source = self._active_source()
        if not isinstance(source, Steerable):
            raise ConfigError(
                f"{type(source).__name__} has a fixed mixture; use ScheduledMixtureWorkSource to change the mixture "
                "during a run (update_mixture)"
            )
        k = self._window_chunks
        if not k:
            raise ConfigError("update_mixture needs windows (flush_every_k_chunks > 0): updates take effect at windows")
        step = self._round_step("update_mixture")
        windows = {lane: self._resume_window(lane) for lane in self._opts.layout().owned}
        source.update_mixture(weights, effects=effect_chunks(windows, int(source.update_lead_windows), k), step=step)

    def skip_global_steps(self, n: int) -> None:
        """Discard the next ``n`` global steps' data, e.g. after restoring past a loss spike.

        Every rank calls it with the same ``n`` between rounds; each lane drops its next ``n`` microbatches, so the run
        continues like an uninterrupted one from ``n`` steps later, on any world size (checkpoints record the skip)."""
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ConfigError(f"skip_global_steps needs an int >= 0, got {n!r}")
        self._skips.append({"step": self._round_step("skip_global_steps"), "steps": n})
        if self._engine is None:
            self._pending_skip += n
        else:
            self._discard(n)

    def _round_step(self, what: str) -> int:
        """The number of whole global steps this rank delivered; an error mid-round."""
        owned = self._opts.layout().owned
        if self._engine is not None:
            states = self._engine.lane_states()
            delivered = {int(states[lane]["delivered"]) for lane in owned}
        else:
            delivered = {self._starts.get(lane, LaneStart()).delivered for lane in owned}
        if len(delivered) > 1:
            raise ConfigError(
                f"{what} must be called between rounds (after a whole global step): this rank's lanes have "
                f"delivered {sorted(delivered)} microbatches"
            )
        return delivered.pop()

    def _discard(self, steps: int) -> None:
        """Consume ``steps`` whole rounds from the engine without handing them out."""
        if self._engine is not None:
            for _ in range(steps * self._opts.layout().lanes_per_rank):
                if next(self._engine, None) is None:
                    break
        self._pending_skip = 0
