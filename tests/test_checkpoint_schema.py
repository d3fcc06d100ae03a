"""The checkpoint schema has one writer and one validator, and merging ranks refuses run-wide disagreement.

* :func:`zephon_core.checkpoint.schema.checkpoint_dict` writes every field; ``Pipeline.state_dict()``
  is exactly its output, and :func:`~zephon_core.checkpoint.schema.validate` accepts it unchanged.
* The validator checks every field, also those a 0.1 checkpoint may lack (``calibration``,
  ``skipped_steps``, ``source``, ``multiplexer``, ``rank``/``world_size``, per-lane extras).
* ``merge_checkpoints`` refuses ranks that disagree on ``calibration``, ``skipped_steps`` or the
  source's state (taking rank 0's would silently resume the other ranks' lanes with another run),
  naming the field and the ranks (the source's state, with a steerable source, is checked in
  zephon-curricula's tests).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from zephon_core import CheckpointError, Pipeline, merge_checkpoints
from zephon_core import checkpoint as ckpt
from zephon_core.checkpoint import schema
from zephon_core.demo import build, make_source

LANES = 4


def _rank(rank: int, source: Any = None) -> Pipeline:
    p = build(1, source=source if source is not None else make_source(chunk_size=32))
    return p.options(lanes=LANES, dp_rank=rank, dp_world_size=2, flush_every_k_chunks=2)


def _ranks() -> list[dict[str, Any]]:
    return [_rank(r).state_dict() for r in (0, 1)]


# -- one writer, one validator ----------------------------------------------------------------------


def test_the_writer_and_the_validator_round_trip() -> None:
    fields: dict[str, Any] = {
        "definition": {"lanes": 2, "operators": []},
        "num_lanes": 2,
        "rank": 1,
        "world_size": 2,
        "lanes": {1: {"window": 3, "skip": 5, "delivered": 7, "replay_from_chunk": 7, "source": {"c": [1]}}},
        "source": {"updates": []},
        "tokens_per_sample": {"a": 12.5},
        "next_lane": 1,
        "skip_log": [{"step": 4, "steps": 2}],
        "pending_skip": 0,
    }
    state = schema.checkpoint_dict(**fields)
    assert schema.validate(json.loads(json.dumps(state))) == state
    assert state["fingerprint"] == ckpt.fingerprint(fields["definition"])
    assert (state["step"], state["mid_round"]) == (7, False)
    assert schema.skipped_steps(state) == ([{"step": 4, "steps": 2}], 0)


def test_state_dict_is_what_the_schema_writes() -> None:
    p = _rank(1)
    p.skip_global_steps(3)
    state = p.state_dict()
    opts = p.run_options
    written = schema.checkpoint_dict(
        definition=p.definition(),
        num_lanes=opts.lanes,
        rank=opts.dp_rank,
        world_size=opts.dp_world_size,
        lanes={int(k): v for k, v in state["lanes"].items()},
        source={},
        tokens_per_sample=p.token_estimates,
        next_lane=state["multiplexer"]["next_lane"],
        skip_log=[{"step": 0, "steps": 3}],
        pending_skip=3,
    )
    assert state == written
    assert schema.validate(state) == state


BAD_FIELDS: list[tuple[str, Any, str]] = [
    ("calibration", {"tokens_per_sample": {"a": -1.0}}, "'calibration' must be"),
    ("calibration", {"tokens_per_sample": {"a": True}}, "'calibration' must be"),
    ("calibration", {"tokens": {"a": 1.0}}, "'calibration' must be"),
    ("calibration", [1.0], "'calibration' must be"),
    ("skipped_steps", {"log": [{"step": 1}], "pending": 0}, "'skipped_steps' must be"),
    ("skipped_steps", {"log": [], "pending": -2}, "'skipped_steps' must be"),
    ("source", [1, 2], "'source' must be a dict"),
    ("multiplexer", {"next_lane": 9}, "'multiplexer' must be"),
    ("multiplexer", {"next_lane": "0"}, "'multiplexer' must be"),
    ("rank", -1, "'rank' must be a non-negative int"),
    ("rank", 5, "'rank' 5 is not below its 'world_size' 2"),
    ("world_size", 0, "'world_size' must be an int >= 1"),
]


@pytest.mark.parametrize(("field", "value", "message"), BAD_FIELDS, ids=[f"{f}={v!r}" for f, v, _ in BAD_FIELDS])
def test_the_validator_checks_every_field(field: str, value: Any, message: str) -> None:
    state = _ranks()[0]
    state[field] = value
    with pytest.raises(CheckpointError, match=message):
        ckpt.validate(state)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [("replay_from_chunk", -3, "'replay_from_chunk' must be"), ("source", 7, "'source' must be a dict")],
)
def test_the_validator_checks_the_lane_entries(key: str, value: Any, message: str) -> None:
    state = _ranks()[0]
    state["lanes"]["0"][key] = value
    with pytest.raises(CheckpointError, match=f"lane 0: {message}"):
        ckpt.validate(state)


def test_fields_a_release_0_1_checkpoint_may_lack_are_optional() -> None:
    state = _ranks()[0]
    for field in ("calibration", "skipped_steps", "source", "multiplexer", "rank", "world_size", "step", "mid_round"):
        del state[field]
    assert ckpt.validate(state) == state


# -- merging refuses run-wide disagreement ----------------------------------------------------------


def test_ranks_that_agree_merge() -> None:
    merged = merge_checkpoints(_ranks())
    assert sorted(merged["lanes"], key=int) == [str(lane) for lane in range(LANES)]


def test_a_disagreeing_calibration_is_refused_naming_the_field_and_the_ranks() -> None:
    states = _ranks()
    states[1]["calibration"] = {"tokens_per_sample": {"paragraphs": 10.0, "sentences": 3.0}}
    with pytest.raises(CheckpointError, match=r"disagree on 'calibration'.*rank\(s\) 0: .*rank\(s\) 1: "):
        merge_checkpoints(states)


def test_disagreeing_skipped_steps_are_refused() -> None:
    states = []
    for rank in (0, 1):
        p = _rank(rank)
        if rank == 1:  # only one rank skipped: the ranks no longer run the same global steps
            p.skip_global_steps(2)
        states.append(p.state_dict())
    with pytest.raises(CheckpointError, match=r"disagree on 'skipped_steps'.*rank\(s\) 0: .*rank\(s\) 1: "):
        merge_checkpoints(states)


def test_an_absent_field_agrees_with_its_empty_value() -> None:
    states = _ranks()
    older = copy.deepcopy(states[1])
    for field in ("calibration", "skipped_steps", "source"):
        del older[field]  # a checkpoint written before these fields existed means "none"
    merge_checkpoints([states[0], older])
