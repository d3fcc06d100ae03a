"""Trainer-steered mixtures: where an update takes effect, and the pacing that makes that deterministic.

``Pipeline.update_mixture(weights)`` is called by the training loop at the same global step on every
rank. Each lane applies it from window ``R + lead``, where ``R`` is the window the lane resumes from
after its last delivered microbatch (a function of the lane's data and of the step, never of timing,
runner, parallelism or world size) and ``lead`` is the source's ``update_lead_windows``. For that to be
safe the feeder must never have computed a chunk at or past that window when the update arrives:
:class:`LeadGate` wraps the source the feeder reads and holds a lane back while its next chunk lies
``lead`` windows or more past the lane's current resume window. The gate changes only timing: a
lane's chunks are the same whether it waited or not.

A consequence worth knowing: one microbatch may not need data from more than ``lead`` windows past
its lane's resume window (with the defaults, 2 windows of 8 chunks of 256 samples: thousands of
records for one microbatch). A pipeline that filters away nearly everything needs a larger lead.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from zephon_core.errors import ZephonError
from zephon_core.work.contract import Chunk, WorkSource
from zephon_core.work.lanes import LaneLayout

POLL_S = 0.002
"""How often a held-back feeder looks again (it waits for the training loop, which is slower)."""


def effect_chunks(resume_windows: dict[int, int], lead: int, flush_every: int) -> dict[int, int]:
    """Per lane, the lane-local chunk from which an update made now applies: window ``R + lead``."""
    return {lane: (window + lead) * flush_every for lane, window in resume_windows.items()}


class LeadGate:
    """A source proxy for the feeder thread: ``chunk(g)`` waits until ``g`` is within its lane's lead.

    Args:
        source: the source the feeder reads (possibly already wrapped for prefetch).
        layout: the lanes (to find a chunk's lane and lane-local index).
        flush_every: chunks per window.
        lead: windows past the resume window a lane may be fed (the source's ``update_lead_windows``).
        resume_window: the lane's current resume window (read from the multiplexer).
        stopped: true once the pipeline is shutting down (the wait then gives up).
    """

    def __init__(
        self,
        source: WorkSource,
        layout: LaneLayout,
        flush_every: int,
        lead: int,
        resume_window: Callable[[int], int],
        stopped: Callable[[], bool],
    ) -> None:
        self._source = source
        self._layout = layout
        self._k = flush_every
        self._lead = lead
        self._resume_window = resume_window
        self.stopped = stopped

    def __getattr__(self, name: str) -> Any:
        return getattr(self._source, name)

    @property
    def datasets(self) -> Sequence[Any]:
        return self._source.datasets

    def limit(self, lane: int) -> int:
        """The first lane-local chunk the feeder may not compute yet."""
        return (self._resume_window(lane) + self._lead) * self._k

    def may_compute(self, number: int) -> bool:
        """Whether chunk ``number`` lies within its lane's lead now (the feeder feeds only such lanes)."""
        lane, local = self._layout.locate(number)
        return local < self.limit(lane)

    def chunk(self, number: int) -> Chunk | None:
        lane, local = self._layout.locate(number)
        while local >= self.limit(lane):  # a safety net: the feeder asks may_compute() first
            if self.stopped():
                raise ZephonError("the pipeline was closed while the feeder waited for the training loop")
            time.sleep(POLL_S)
        return self._source.chunk(number)
