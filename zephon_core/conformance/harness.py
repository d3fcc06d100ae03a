"""Run a pipeline as several simulated data-parallel ranks and hash its global batches.

A global step is the next microbatch of every lane, ordered by lane. Ranks are run one after
another in this process (each a separate pipeline with its own threads and workers), which is
exactly what separate ranks would compute, because a lane's output never depends on its rank.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from zephon_core.checkpoint import merge_checkpoints
from zephon_core.hashing import hash_global_batch
from zephon_core.pipeline import Pipeline
from zephon_core.runtime.types import SampleBatch

Build = Callable[[int], Pipeline]
"""``build(parallelism) -> Pipeline`` without rank options; the harness sets those."""


@dataclass
class RunResult:
    """Hashes of each global step, and (when the run was cut) the merged checkpoint."""

    hashes: list[str]
    state: dict[str, Any] | None = None
    batches: list[list[SampleBatch]] = field(default_factory=list, repr=False)
    snapshots: dict[int, dict[str, Any]] = field(default_factory=dict, repr=False)
    """Merged checkpoints taken after each of the ``snapshots`` steps, by step."""


def run_global(
    build: Build,
    *,
    lanes: int,
    world_size: int = 1,
    runner: str = "inline",
    parallelism: int = 1,
    flush_every: int | None = None,
    resume: dict[str, Any] | None = None,
    steps: int | None = None,
    keep_batches: bool = False,
    snapshots: Sequence[int] = (),
) -> RunResult:
    """Run every rank of ``world_size`` ranks; optionally resume from ``resume`` and stop after ``steps``.

    Returns the hash of every complete global step and, when ``steps`` is given, the merged
    ``state_dict()`` of all ranks after that many steps. ``snapshots`` are steps after which a
    checkpoint is also taken without stopping (a deep copy, as if saved to disk): one pass gives
    what one run cut after each of those steps would, instead of a replay of the prefix per cut.
    """
    per = lanes // world_size
    per_rank: list[list[SampleBatch]] = []
    states: list[dict[str, Any]] = []
    marks = {step * per: step for step in snapshots}
    taken: dict[int, list[dict[str, Any]]] = {}
    for rank in range(world_size):
        opts: dict[str, Any] = {"lanes": lanes, "dp_rank": rank, "dp_world_size": world_size, "runner": runner}
        if flush_every is not None:
            opts["flush_every_k_chunks"] = flush_every
        with build(parallelism).options(**opts) as p:
            if resume is not None:
                p.load_state_dict(resume)
            got: list[SampleBatch] = []
            limit = None if steps is None else steps * per
            for b in p:
                got.append(b)
                if len(got) in marks:
                    taken.setdefault(marks[len(got)], []).append(copy.deepcopy(p.state_dict()))
                if limit is not None and len(got) >= limit:
                    break
            if steps is not None:
                states.append(p.state_dict())
        per_rank.append(got)
    n = min(len(b) // per for b in per_rank)
    hashes = [hash_global_batch([b for r in per_rank for b in r[t * per : (t + 1) * per]]) for t in range(n)]
    merged = {step: merge_checkpoints(parts) for step, parts in taken.items() if len(parts) == world_size}
    return RunResult(hashes, merge_checkpoints(states) if states else None, per_rank if keep_batches else [], merged)
