"""Checkpoint format: per-lane replay positions, never operator state, never pickle.

A checkpoint says, for every lane, which window to replay from and how many of that window's
records the training loop had already consumed. Operator state is rebuilt by replaying that
window (every operator before ``batch`` starts each window fresh). The data is plain JSON, its
size grows with the number of lanes and in-flight chunks, not with training progress.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from zephon_core.errors import CheckpointError

SCHEMA = "zephon-checkpoint"
SCHEMA_VERSION = 1

MAX_POSITION = 1 << 48
"""Upper bound for window numbers and skip counts: far beyond any real run, below overflow."""


def fingerprint(definition: Mapping[str, Any]) -> str:
    """SHA-256 of the canonical JSON of a pipeline definition."""
    blob = json.dumps(definition, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()


def diff_definitions(old: Any, new: Any, path: str = "") -> list[str]:
    """Human-readable differences between two definitions, e.g. ``operators[2].config.seed: 7 != 8``."""
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[str] = []
        for k in sorted(set(old) | set(new)):
            p = f"{path}.{k}" if path else str(k)
            if k not in old:
                out.append(f"{p}: not in checkpoint, now {new[k]!r}")
            elif k not in new:
                out.append(f"{p}: {old[k]!r} in checkpoint, missing now")
            else:
                out.extend(diff_definitions(old[k], new[k], p))
        return out
    if isinstance(old, list) and isinstance(new, list):
        if len(old) != len(new):
            return [f"{path}: {len(old)} entries in checkpoint, {len(new)} now"]
        out = []
        for i, (a, b) in enumerate(zip(old, new)):
            out.extend(diff_definitions(a, b, f"{path}[{i}]"))
        return out
    return [] if old == new else [f"{path}: {old!r} in checkpoint, {new!r} now"]


def validate(state: Any) -> dict[str, Any]:
    """Check a checkpoint's structure, types and fingerprint; return it. Raises :class:`CheckpointError`.

    Nothing here depends on the pipeline it will be loaded into (that is checked by
    ``Pipeline.load_state_dict``), so a checkpoint can be validated on its own.
    """
    from zephon_core.runtime.replay import LaneStart

    if not isinstance(state, Mapping):
        raise CheckpointError(f"a checkpoint must be a dict, got {type(state).__name__}")
    if state.get("schema") != SCHEMA:
        raise CheckpointError(f"not a zephon checkpoint (schema={state.get('schema')!r})")
    if state.get("version") != SCHEMA_VERSION:
        raise CheckpointError(
            f"checkpoint schema version {state.get('version')!r} is not supported (expected {SCHEMA_VERSION})"
        )
    for key in ("fingerprint", "definition", "lanes", "num_lanes"):
        if key not in state:
            raise CheckpointError(f"checkpoint lacks {key!r}")
    num_lanes = state["num_lanes"]
    if not _is_int(num_lanes) or num_lanes < 1:
        raise CheckpointError(f"checkpoint 'num_lanes' must be an int >= 1, got {num_lanes!r}")
    if not isinstance(state["definition"], Mapping):
        raise CheckpointError("checkpoint 'definition' must be a dict")
    if state["fingerprint"] != fingerprint(state["definition"]):
        raise CheckpointError(
            "checkpoint fingerprint does not match its own definition: the checkpoint was edited or corrupted"
        )
    lanes = state["lanes"]
    if not isinstance(lanes, Mapping):
        raise CheckpointError("checkpoint 'lanes' must be a dict keyed by lane id")
    for lane, ls in lanes.items():
        if not isinstance(lane, str) or not lane.isdigit() or int(lane) >= num_lanes:
            raise CheckpointError(f"checkpoint has an invalid lane id {lane!r} (num_lanes={num_lanes})")
        start = LaneStart.from_state(lane, ls)
        for f in ("window", "skip"):
            if getattr(start, f) >= MAX_POSITION:
                raise CheckpointError(f"checkpoint lane {lane}: {f}={getattr(start, f)} is beyond any possible run")
    step = state.get("step")
    if step is not None and (not _is_int(step) or step < 0):
        raise CheckpointError(f"checkpoint 'step' must be a non-negative int, got {step!r}")
    if not isinstance(state.get("mid_round", False), bool):
        raise CheckpointError(f"checkpoint 'mid_round' must be a bool, got {state.get('mid_round')!r}")
    return dict(state)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def merge_checkpoints(states: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Join the per-rank states of one global step into one checkpoint (a union keyed by lane).

    Raises:
        CheckpointError: the states belong to different pipelines, were taken at different global
            steps or in the middle of a round (naming the ranks and their steps), or disagree on a lane.
    """
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
    lanes: dict[str, Any] = {}
    for s in states:
        for lane, ls in s["lanes"].items():
            if lane in lanes and lanes[lane] != ls:
                raise CheckpointError(f"lane {lane} appears in two rank states with different positions")
            lanes[lane] = ls
    merged = dict(base)
    merged["lanes"] = {k: lanes[k] for k in sorted(lanes, key=int)}
    merged.pop("rank", None)
    merged["world_size"] = None
    return merged
