"""The checkpoint dict: the one place that writes its fields (:func:`checkpoint_dict`) and validates
them (:func:`validate`, which every reader calls first), so a field is spelled and checked here only:

* ``schema``, ``version``: what this is (:data:`SCHEMA`, :data:`SCHEMA_VERSION`);
* ``definition``, ``fingerprint``: the pipeline it belongs to (see :mod:`~zephon_core.checkpoint.fingerprint`);
* ``num_lanes``; ``rank``, ``world_size`` of the rank that wrote it (``world_size`` is None once merged);
* ``step``, ``mid_round``: whole global steps delivered, and whether the lanes stand at different counts;
* ``lanes``: per lane id, the replay position (:class:`~zephon_core.checkpoint.replay.LaneStart` fields,
  ``replay_from_chunk``) and the source's part for that lane (``source``, lane-scoped sources only);
* ``source``: the work source's own state (the same on every rank);
* ``calibration``: ``{"tokens_per_sample": {dataset: tokens} | None}``, frozen at calibration;
* ``multiplexer``: ``{"next_lane": lane}``, the lane the writing rank hands out next;
* ``skipped_steps``: ``{"log": [{"step", "steps"}, ...], "pending": steps}`` (``skip_global_steps``).

Fields that 0.1 checkpoints may lack (``calibration``, ``skipped_steps``, ``source``, ``multiplexer``,
``rank``, ``world_size``, ``step``, ``mid_round``) are optional; present, they must have their shape.
Nothing here depends on the pipeline a checkpoint will be loaded into."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from zephon_core.checkpoint.fingerprint import fingerprint
from zephon_core.checkpoint.replay import LaneStart
from zephon_core.errors import CheckpointError
from zephon_core.work.lanes import is_int

SCHEMA = "zephon-checkpoint"
SCHEMA_VERSION = 1

MAX_POSITION = 1 << 48
"""Upper bound for window numbers and skip counts: far beyond any real run, below overflow."""

NO_SKIPS: dict[str, Any] = {"log": [], "pending": 0}
"""``skipped_steps`` of a run that never skipped (and of checkpoints written before skips existed)."""


def checkpoint_dict(
    *,
    definition: Mapping[str, Any],
    num_lanes: int,
    rank: int,
    world_size: int,
    lanes: Mapping[int, Mapping[str, Any]],
    source: Mapping[str, Any],
    tokens_per_sample: Mapping[str, float] | None,
    next_lane: int,
    skip_log: Sequence[Mapping[str, int]],
    pending_skip: int,
) -> dict[str, Any]:
    """A rank's checkpoint from its values (the fields of the module docstring). ``step`` and ``mid_round``
    come from the lanes' ``delivered``, ``fingerprint`` from ``definition``: they cannot disagree."""
    delivered = [int(entry["delivered"]) for entry in lanes.values()]
    return {
        "schema": SCHEMA,
        "version": SCHEMA_VERSION,
        "fingerprint": fingerprint(definition),
        "definition": definition,
        "num_lanes": num_lanes,
        "rank": rank,
        "world_size": world_size,
        "step": min(delivered),
        "mid_round": max(delivered) != min(delivered),
        "source": dict(source),
        "calibration": {"tokens_per_sample": dict(tokens_per_sample) if tokens_per_sample is not None else None},
        "multiplexer": {"next_lane": next_lane},
        "lanes": {str(lane): dict(entry) for lane, entry in lanes.items()},
        "skipped_steps": {"log": [dict(s) for s in skip_log], "pending": pending_skip},
    }


def validate(state: Any) -> dict[str, Any]:
    """Check a checkpoint's structure, types and fingerprint; return it. Raises :class:`CheckpointError`."""
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
    if not is_int(num_lanes) or num_lanes < 1:
        raise CheckpointError(f"checkpoint 'num_lanes' must be an int >= 1, got {num_lanes!r}")
    if not isinstance(state["definition"], Mapping):
        raise CheckpointError("checkpoint 'definition' must be a dict")
    if state["fingerprint"] != fingerprint(state["definition"]):
        raise CheckpointError(
            "checkpoint fingerprint does not match its own definition: the checkpoint was edited or corrupted"
        )
    _check_lanes(state["lanes"], num_lanes)
    step = state.get("step")
    if step is not None and (not is_int(step) or step < 0):
        raise CheckpointError(f"checkpoint 'step' must be a non-negative int, got {step!r}")
    if not isinstance(state.get("mid_round", False), bool):
        raise CheckpointError(f"checkpoint 'mid_round' must be a bool, got {state.get('mid_round')!r}")
    rank, world_size = state.get("rank"), state.get("world_size")
    if rank is not None and (not is_int(rank) or rank < 0):
        raise CheckpointError(f"checkpoint 'rank' must be a non-negative int, got {rank!r}")
    if world_size is not None and (not is_int(world_size) or world_size < 1):
        raise CheckpointError(f"checkpoint 'world_size' must be an int >= 1 (None once merged), got {world_size!r}")
    if rank is not None and world_size is not None and rank >= world_size:
        raise CheckpointError(f"checkpoint 'rank' {rank} is not below its 'world_size' {world_size}")
    if not isinstance(state.get("source") or {}, Mapping):
        raise CheckpointError(f"checkpoint 'source' must be a dict (the work source's state), got {state['source']!r}")
    _check_calibration(state.get("calibration"))
    _check_multiplexer(state.get("multiplexer"), num_lanes)
    skipped_steps(state)
    return dict(state)


def skipped_steps(state: Mapping[str, Any]) -> tuple[list[dict[str, int]], int]:
    """The skip log and pending skip of a checkpoint (checkpoints before skips existed have neither);
    a :class:`CheckpointError` if ``skipped_steps`` has another shape."""
    raw = state.get("skipped_steps") or NO_SKIPS
    log: Any = raw.get("log") if isinstance(raw, Mapping) else None
    pending: Any = raw.get("pending") if isinstance(raw, Mapping) else None
    entries_ok = isinstance(log, list) and all(
        isinstance(s, Mapping) and set(s) == {"step", "steps"} and all(is_int(v) and v >= 0 for v in s.values())
        for s in log
    )
    if not entries_ok or not (is_int(pending) and pending >= 0):
        raise CheckpointError(
            f"checkpoint 'skipped_steps' must be {{'log': [{{'step', 'steps'}}, ...], 'pending': int}}, got {raw!r}"
        )
    return [dict(s) for s in log], pending


def _check_lanes(lanes: Any, num_lanes: int) -> None:
    if not isinstance(lanes, Mapping):
        raise CheckpointError("checkpoint 'lanes' must be a dict keyed by lane id")
    for lane, ls in lanes.items():
        if not isinstance(lane, str) or not lane.isdigit() or int(lane) >= num_lanes:
            raise CheckpointError(f"checkpoint has an invalid lane id {lane!r} (num_lanes={num_lanes})")
        start = LaneStart.from_state(lane, ls)
        for f in ("window", "skip"):
            if getattr(start, f) >= MAX_POSITION:
                raise CheckpointError(f"checkpoint lane {lane}: {f}={getattr(start, f)} is beyond any possible run")
        first = ls.get("replay_from_chunk", 0)
        if not is_int(first) or first < 0:
            raise CheckpointError(
                f"checkpoint lane {lane}: 'replay_from_chunk' must be a non-negative int, got {first!r}"
            )
        if not isinstance(ls.get("source") or {}, Mapping):
            raise CheckpointError(f"checkpoint lane {lane}: 'source' must be a dict (the lane's source state)")


def _check_calibration(calibration: Any) -> None:
    est = calibration.get("tokens_per_sample") if isinstance(calibration, Mapping) else None
    ok = calibration is None or (isinstance(calibration, Mapping) and set(calibration) <= {"tokens_per_sample"})
    ok = ok and (est is None or (isinstance(est, Mapping) and all(isinstance(k, str) for k in est)))
    if not ok or not (est is None or all(_is_positive(v) for v in est.values())):
        raise CheckpointError(
            "checkpoint 'calibration' must be {'tokens_per_sample': {dataset: tokens > 0} or None}, "
            f"got {calibration!r}"
        )


def _check_multiplexer(multiplexer: Any, num_lanes: int) -> None:
    nxt: Any = multiplexer.get("next_lane") if isinstance(multiplexer, Mapping) else None
    shaped = isinstance(multiplexer, Mapping) and set(multiplexer) == {"next_lane"}
    if multiplexer is not None and (not shaped or not is_int(nxt) or not 0 <= nxt < num_lanes):
        raise CheckpointError(
            f"checkpoint 'multiplexer' must be {{'next_lane': lane below num_lanes={num_lanes}}}, got {multiplexer!r}"
        )


def _is_positive(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0
