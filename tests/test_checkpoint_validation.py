"""Checkpoints you can trust: every bad checkpoint is a CheckpointError that says what is wrong, found
before anything changes (or, for a skip no window could hold, before any wrong record is delivered);
merges of ranks at different steps are refused; two checkpoints at the same step are byte-identical.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from zephon_core import CheckpointError, Dataset, MixtureSpec, Pipeline, StaticMixtureWorkSource, merge_checkpoints
from zephon_core.conformance.harness import run_global
from zephon_core.demo import build, make_source

LANES = 4


def _builder(par: int = 1) -> Pipeline:
    return build(par, source=make_source(chunk_size=32))


@pytest.fixture(scope="module")
def good() -> dict[str, Any]:
    return run_global(_builder, lanes=LANES, world_size=2, runner="threads", flush_every=2, steps=12).state


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(state: dict[str, Any]) -> None:
        *parents, leaf = path.split(".")
        node = state
        for p in parents:
            node = node[p]
        node[leaf] = value

    return edit


def _edit_definition(state: dict[str, Any]) -> None:
    state["definition"]["lanes"] = 8  # the fingerprint no longer matches what it claims to hash


CASES: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("skip 1e9 as a float", _set("lanes.1.skip", 1e9), "'skip' must be a non-negative int"),
    ("skip True", _set("lanes.1.skip", True), "'skip' must be a non-negative int"),
    ("window as a string", _set("lanes.0.window", "3"), "'window' must be a non-negative int"),
    ("delivered negative", _set("lanes.2.delivered", -1), "'delivered' must be a non-negative int"),
    ("window 1e9", _set("lanes.1.window", 10**9), "past the end of the data"),
    ("window 2**70", _set("lanes.1.window", 2**70), "beyond any possible run"),
    ("skip 2**70", _set("lanes.3.skip", 2**70), "beyond any possible run"),
    ("lane entry not a dict", _set("lanes.0", [1, 2, 3]), "lane 0: expected a dict"),
    ("lanes not a dict", _set("lanes", [0, 1]), "'lanes' must be a dict"),
    ("lane id out of range", _set("lanes.9", {"window": 0, "skip": 0, "delivered": 0}), "invalid lane id '9'"),
    ("num_lanes a bool", _set("num_lanes", True), "'num_lanes' must be an int"),
    ("fingerprint edited", _set("fingerprint", "0" * 64), "fingerprint does not match its own definition"),
    ("definition edited", _edit_definition, "fingerprint does not match its own definition"),
    ("schema version", _set("version", 99), "schema version 99 is not supported"),
    ("step a string", _set("step", "12"), "'step' must be a non-negative int"),
    ("token estimates bad", _set("calibration", {"tokens_per_sample": {"x": 1.0}}), "calibration"),
    ("source state unknown", _set("source", {"cursor": 5}), "keeps no state"),
]


@pytest.mark.parametrize(("label", "edit", "message"), CASES, ids=[c[0] for c in CASES])
def test_a_bad_checkpoint_is_refused_and_changes_nothing(good, label, edit, message):
    bad = copy.deepcopy(good)
    edit(bad)
    p = _builder().options(lanes=LANES, flush_every_k_chunks=2)
    before = p.state_dict()
    with pytest.raises(CheckpointError, match=message):
        p.load_state_dict(bad)
    assert p.state_dict() == before, f"{label}: a rejected checkpoint changed the pipeline"


def test_a_skip_no_window_can_hold_fails_before_any_wrong_record(good):
    bad = copy.deepcopy(good)
    bad["lanes"]["1"]["skip"] = 10**9  # an int, in bounds for the type: only replay can tell
    bad["fingerprint"] = good["fingerprint"]
    p = _builder().options(lanes=LANES, flush_every_k_chunks=2)
    p.load_state_dict(bad)
    with pytest.raises(CheckpointError, match=r"skip 1000000000 records of window \d+, but that window holds only"), p:
        list(p)


def test_ranks_at_different_steps_do_not_merge():
    def state_after(rank: int, rounds: int) -> dict[str, Any]:
        with _builder().options(lanes=LANES, dp_rank=rank, dp_world_size=2, flush_every_k_chunks=2) as p:
            it = iter(p)
            for _ in range(rounds * 2):
                next(it)
            return p.state_dict()

    with pytest.raises(CheckpointError, match=r"rank 0 at step 3, rank 1 at step 4"):
        merge_checkpoints([state_after(0, 3), state_after(1, 4)])


def test_a_mid_round_checkpoint_resumes_only_the_same_rank_layout():
    with _builder().options(lanes=LANES, dp_rank=1, dp_world_size=2, flush_every_k_chunks=2) as p:
        it = iter(p)
        for _ in range(5):  # two and a half rounds over two lanes
            next(it)
        state = p.state_dict()
    assert state["step"] == 2 and state["mid_round"] is True
    with pytest.raises(CheckpointError, match="same global-step boundary"):
        merge_checkpoints([state])
    other = _builder().options(lanes=LANES, dp_rank=0, dp_world_size=1, flush_every_k_chunks=2)
    with pytest.raises(CheckpointError, match="middle of a round"):
        other.load_state_dict(state)
    same = _builder().options(lanes=LANES, dp_rank=1, dp_world_size=2, flush_every_k_chunks=2)
    same.load_state_dict(state)  # the same rank of the same world size resumes exactly (tested elsewhere)


def test_checkpoints_at_the_same_step_are_byte_identical():
    blobs = []
    for runner, par in [("threads", 3), ("processes", 2), ("inline", 1)]:
        res = run_global(_builder, lanes=LANES, world_size=2, runner=runner, parallelism=par, flush_every=2, steps=9)
        blobs.append(json.dumps(res.state, sort_keys=True))
    assert blobs[0] == blobs[1] == blobs[2]


def test_the_token_estimates_of_a_rejected_checkpoint_are_not_applied():
    ds = [Dataset.from_records(n, [{"text": "x" * (i % 50)} for i in range(300)], 100) for n in ("a", "b")]
    ws = StaticMixtureWorkSource(
        ds, mixture=MixtureSpec({"a": 1, "b": 1}), weight_by="tokens", tokens_per_sample={"a": 3.0, "b": 4.0}
    )
    p = Pipeline(ws).batch(4)
    state = p.state_dict()
    state["calibration"] = {"tokens_per_sample": {"a": 10.0, "b": 20.0}}
    state["lanes"]["0"]["window"] = 10**6  # makes it bad after the estimates were read
    with pytest.raises(CheckpointError):
        p.load_state_dict(state)
    assert p.calibrate() == {"a": 3.0, "b": 4.0}
    assert ws.tokens_per_sample == {"a": 3.0, "b": 4.0}
