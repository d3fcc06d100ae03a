"""The steered, scheduled pipeline whose checkpoint zephon-core 0.1.0 wrote into this folder: user code, frozen.

This module plays the part of a user's training script, run once with release 0.1.0 by
``make_checkpoint.py`` and today by ``tests/test_checkpoint_0_1_0.py``. It must never change (a user
upgrading mid-run does not rewrite the script that built the pipeline either), and it imports only
what a 0.1.0 user's script imported: the ``zephon_core`` root, where ``ScheduledMixtureWorkSource``
and ``MixtureSchedule`` were kernel classes then and live in zephon-curricula now, and the plugin
manager (the kernel's built-ins only, nothing scanned, so other installed plugins cannot matter).

The pipeline: two in-memory datasets mixed by a linear ``MixtureSchedule``, a trainer-steered
``update_mixture`` at global step :data:`UPDATE_STEP`, ``shuffle`` and ``batch``. The records are
plain ints (no functions of this module are fingerprinted, so the file's path is not part of the data).
"""

from __future__ import annotations

import itertools
from typing import Any

from zephon_core import (
    Dataset,
    MixtureSchedule,
    Pipeline,
    ScheduledMixtureWorkSource,
    hash_global_batch,
    merge_checkpoints,
)
from zephon_core.plugins import ZephonPluginManager

LANES = 4
FLUSH_EVERY = 2
STEPS = 30
"""Global steps of the uninterrupted run."""
CUT = 9
"""Global steps before the checkpoint (taken on 2 ranks)."""
UPDATE_STEP = 5
UPDATE = {"web": 0.3, "code": 0.7}
"""The trainer's update, made after global step :data:`UPDATE_STEP` (before the checkpoint)."""


def build() -> Pipeline:
    """The pipeline, from a fresh source (``load_state_dict`` restores the update log into it)."""
    web = [{"x": i} for i in range(3000)]
    code = [{"x": 100_000 + i} for i in range(1200)]
    schedule = MixtureSchedule([(0, {"web": 0.8, "code": 0.2}), (600, {"web": 0.5, "code": 0.5})], interpolate="linear")
    source = ScheduledMixtureWorkSource(
        [Dataset.from_records("web", web, 250), Dataset.from_records("code", code, 200)],
        schedule=schedule,
        chunk_size=16,
        seed=11,
    )
    plugins = ZephonPluginManager(load_entrypoints=False)  # the built-ins only: what else is installed cannot matter
    return Pipeline(source, plugins=plugins).shuffle(buffer_size=32, seed=3).batch(microbatch_size=8)


def run(world_size: int, *, steps: int, resume: dict[str, Any] | None = None) -> tuple[list[str], dict[str, Any]]:
    """Every rank of a world for ``steps`` global steps (updating after :data:`UPDATE_STEP`): the global
    batches' hashes and the merged checkpoint taken at the end."""
    per = LANES // world_size
    per_rank = []
    states = []
    for rank in range(world_size):
        opts = {"lanes": LANES, "dp_rank": rank, "dp_world_size": world_size, "flush_every_k_chunks": FLUSH_EVERY}
        with build().options(runner="inline", **opts) as p:
            start = 0
            if resume is not None:
                p.load_state_dict(resume)
                start = min(lane["delivered"] for lane in resume["lanes"].values())
            it = iter(p)
            got = []
            for step in range(start, start + steps):
                round_ = list(itertools.islice(it, per))
                assert len(round_) == per, f"rank {rank} ran out at global step {step}"
                got += round_
                if step + 1 == UPDATE_STEP:
                    p.update_mixture(UPDATE)
            states.append(p.state_dict())
        per_rank.append(got)
    hashes = [hash_global_batch([b for r in per_rank for b in r[t * per : (t + 1) * per]]) for t in range(steps)]
    return hashes, merge_checkpoints(states)
