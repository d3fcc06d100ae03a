"""Checkpoint format: per-lane replay positions, never operator state, never pickle.

Per lane, a checkpoint says which window to replay from and how many of its records the training
loop had consumed (operators before ``batch`` start each window fresh, so replaying rebuilds their
state): plain JSON that grows with the lanes, not with training progress. Ranks without a process
group (JAX, custom launchers) keep one file each (:func:`save_rank_state`, :func:`load_merged_state`)."""

from __future__ import annotations

from zephon_core.checkpoint.fingerprint import diff_definitions, fingerprint
from zephon_core.checkpoint.merge import merge_checkpoints
from zephon_core.checkpoint.rank_files import RANK_FILE_FORMAT, load_merged_state, rank_state_path, save_rank_state
from zephon_core.checkpoint.schema import MAX_POSITION, SCHEMA, SCHEMA_VERSION, validate

__all__ = [
    "MAX_POSITION",
    "RANK_FILE_FORMAT",
    "SCHEMA",
    "SCHEMA_VERSION",
    "diff_definitions",
    "fingerprint",
    "load_merged_state",
    "merge_checkpoints",
    "rank_state_path",
    "save_rank_state",
    "validate",
]
