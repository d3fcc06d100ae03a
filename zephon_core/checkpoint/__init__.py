"""Checkpoint format: per-lane replay positions, never operator state, never pickle.

A checkpoint says, for every lane, which window to replay from and how many of that window's
records the training loop had already consumed. Operator state is rebuilt by replaying that
window (every operator before ``batch`` starts each window fresh). The data is plain JSON, its
size grows with the number of lanes and in-flight chunks, not with training progress.

Ranks that share no process group (JAX, custom launchers) keep one JSON file each with
:func:`save_rank_state`; :func:`load_merged_state` joins the latest complete step.

The package holds one idea per module: :mod:`~zephon_core.checkpoint.schema` writes and validates
the checkpoint dict, :mod:`~zephon_core.checkpoint.fingerprint` ties it to a pipeline definition,
:mod:`~zephon_core.checkpoint.merge` joins ranks, :mod:`~zephon_core.checkpoint.rank_files` keeps
per-rank files, and :mod:`~zephon_core.checkpoint.replay` resumes a lane from it.
"""

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
