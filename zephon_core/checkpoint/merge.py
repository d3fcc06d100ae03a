"""Joining the per-rank states of one global step into one checkpoint that any world size resumes from.

Each rank writes only its own lanes; the merge is their union keyed by lane. What a rank writes about
the run as a whole (:data:`SHARED_FIELDS`) must agree across ranks: taking rank 0's value would
resume the others' lanes with other data."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from zephon_core.checkpoint.fingerprint import diff_definitions
from zephon_core.checkpoint.schema import NO_SKIPS, validate
from zephon_core.errors import CheckpointError

SHARED_FIELDS: dict[str, Any] = {"calibration": {"tokens_per_sample": None}, "skipped_steps": NO_SKIPS, "source": {}}
"""Run-wide fields every rank must agree on, with the value a checkpoint that lacks one means."""


def merge_checkpoints(states: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Join the per-rank states of one global step into one checkpoint (a union keyed by lane).

    Raises:
        CheckpointError: the states belong to different pipelines, were taken at different global steps
            or mid-round (naming ranks and steps), or disagree on a lane or a run-wide field (naming it)."""
    states = [validate(s) for s in states]
    if not states:
        raise CheckpointError("merge_checkpoints needs at least one state")
    base = states[0]
    for s in states:
        if s["fingerprint"] != base["fingerprint"]:
            diffs = diff_definitions(base["definition"], s["definition"])
            raise CheckpointError(f"cannot merge checkpoints of different pipelines: {'; '.join(diffs[:5])}")
    where = [
        f"rank {s.get('rank', '?')} at step {s.get('step')}{' (mid-round)' if s.get('mid_round') else ''}"
        for s in states
    ]
    if len({s.get("step") for s in states}) > 1 or any(s.get("mid_round") for s in states):
        raise CheckpointError(
            "rank states must all be taken at the same global-step boundary (after the same number of whole "
            f"rounds): {', '.join(where)}"
        )
    for field, absent in SHARED_FIELDS.items():
        _check_agreement(states, field, absent)
    lanes: dict[str, Any] = {}
    for s in states:
        for lane, ls in s["lanes"].items():
            if lane in lanes and lanes[lane] != ls:
                raise CheckpointError(f"lane {lane} appears in two rank states with different positions")
            lanes[lane] = ls
    lanes = {k: lanes[k] for k in sorted(lanes, key=int)}
    return {k: v for k, v in base.items() if k != "rank"} | {"lanes": lanes, "world_size": None}


def _check_agreement(states: list[Mapping[str, Any]], field: str, absent: Any) -> None:
    """Raise naming ``field`` and which ranks hold which value when the ranks' values differ."""
    groups: dict[str, list[str]] = {}
    for i, s in enumerate(states):
        value = s.get(field) or absent
        key = json.dumps(value, sort_keys=True, default=repr)
        groups.setdefault(key, []).append(str(s.get("rank", f"#{i}")))
    if len(groups) > 1:
        held = "; ".join(f"rank(s) {', '.join(ranks)}: {value}" for value, ranks in groups.items())
        raise CheckpointError(
            f"rank states disagree on {field!r}, which must be the same on every rank of one run: {held}"
        )
