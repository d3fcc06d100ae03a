"""What a pipeline yields: one microbatch from one lane."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from zephon_core.hashing import hash_arrays
from zephon_core.ops.contract import Lineage
from zephon_core.runtime.replay import ResumePoint


@dataclass(slots=True)
class SampleBatch:
    """A microbatch of ``lane``; ``lane_index`` counts that lane's microbatches from the start of the run.

    Attributes:
        data: the collated arrays, one row per record.
        lineage: per row, the source sample ids it was made from (see ``Pipeline.explain``).
        dropped: lineage of records dropped (filtered) in this lane since its previous microbatch.
        resume: where the lane resumes after this microbatch (see :mod:`zephon_core.runtime.replay`).
    """

    lane: int
    lane_index: int
    data: dict[str, np.ndarray]
    lineage: list[Lineage]
    dropped: list[Lineage] = field(default_factory=list)
    resume: ResumePoint | None = field(default=None, repr=False)
    view: Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]] | None = field(default=None, repr=False)

    def to_training(self) -> dict[str, np.ndarray]:
        """The arrays a training step consumes (after the pipeline's training view, if any)."""
        return self.view(self.data) if self.view is not None else self.data

    def sha256(self) -> str:
        """Digest of the training arrays (names, dtypes, shapes, bytes)."""
        return hash_arrays(self.to_training())

    def __len__(self) -> int:
        return len(self.lineage)

    def describe(self) -> dict[str, Any]:
        return {"lane": self.lane, "lane_index": self.lane_index, "rows": len(self)}
