"""``options(lane_assignment="permute")``: each round of chunks dealt to the lanes by a seeded
permutation. Still a pure function of the configuration: the determinism matrix
and resume on another world size hold, and the option is in the fingerprint."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers import numbered
from zephon_core import (
    CheckpointError,
    ConfigError,
    MixtureSchedule,
    MixtureSpec,
    Pipeline,
    ScheduledMixtureWorkSource,
    StaticMixtureWorkSource,
)
from zephon_core.conformance.harness import run_global
from zephon_core.work.lanes import LaneLayout

LANES = 4


def test_every_round_is_dealt_whole_and_locate_inverts_it():
    lay = LaneLayout(LANES, assignment="permute", seed=9)
    moved = 0
    for local in range(200):
        got = sorted(lay.chunk(lane, local) for lane in range(LANES))
        assert got == list(range(local * LANES, (local + 1) * LANES))
        for lane in range(LANES):
            assert lay.locate(lay.chunk(lane, local)) == (lane, local)
        moved += any(lay.chunk(lane, local) % LANES != lane for lane in range(LANES))
    assert moved > 150  # most rounds are not the identity deal
    other = LaneLayout(LANES, assignment="permute", seed=10)
    assert [lay.chunk(0, k) for k in range(50)] != [other.chunk(0, k) for k in range(50)]


def triple(p: dict) -> dict:
    return {"d": p["d"], "i": p["i"] * 3}


def _alternating(par: int, assignment: str = "permute") -> Pipeline:
    """Two datasets at 50/50 with one sample per chunk: chunk g holds dataset g mod 2."""
    a, b = numbered("a", 400, 100, d=0), numbered("b", 400, 100, d=1)
    ws = StaticMixtureWorkSource([a, b], mixture=MixtureSpec({"a": 0.5, "b": 0.5}), chunk_size=1, seed=3)
    return (
        Pipeline(ws)
        .map_transform(triple, parallelism=par)
        .batch(4)
        .options(lane_assignment=assignment, lane_seed=1)
    )


def test_a_period_that_divides_the_lanes_no_longer_gives_each_lane_one_dataset():
    def kinds(assignment: str) -> dict[int, set[int]]:
        res = run_global(lambda par: _alternating(par, assignment), lanes=LANES, keep_batches=True, flush_every=4)
        seen: dict[int, set[int]] = {}
        for b in res.batches[0]:
            seen.setdefault(b.lane, set()).update(np.unique(b.data["d"]).tolist())
        return seen

    assert all(len(v) == 1 for v in kinds("modulo").values())  # lane l only ever sees dataset l mod 2
    assert all(v == {0, 1} for v in kinds("permute").values())


@pytest.fixture(scope="module")
def base() -> list[str]:
    res = run_global(_alternating, lanes=LANES, flush_every=4)
    assert len(res.hashes) == 50
    return res.hashes


@pytest.mark.parametrize(("runner", "par", "world"), [("threads", 2, 2), ("processes", 2, 4)])
def test_permuted_lanes_are_deterministic(base, runner, par, world):
    assert (
        run_global(_alternating, lanes=LANES, world_size=world, runner=runner, parallelism=par, flush_every=4).hashes
        == base
    )


def test_permuted_lanes_resume_on_another_world_size(base):
    first = run_global(_alternating, lanes=LANES, world_size=2, runner="threads", flush_every=4, steps=len(base) // 3)
    rest = run_global(_alternating, lanes=LANES, world_size=4, runner="threads", flush_every=4, resume=first.state)
    assert first.hashes + rest.hashes == base
    assert run_global(lambda p: _alternating(p, "modulo"), lanes=LANES, flush_every=4).hashes != base


def test_the_assignment_is_in_the_fingerprint():
    with _alternating(1).options(lanes=LANES) as p:
        next(iter(p))
        state = p.state_dict()
    assert "lane_assignment" not in _alternating(1, "modulo").options(lanes=LANES).definition()
    other = _alternating(1, "modulo").options(lanes=LANES)
    with pytest.raises(CheckpointError, match="lane_assignment"):
        other.load_state_dict(state)


def test_bad_values_and_a_per_lane_source_are_refused():
    with pytest.raises(ConfigError, match="lane_assignment must be one of"):
        _alternating(1, "shuffle")
    ws = ScheduledMixtureWorkSource([numbered("a", 100, 50)], schedule=MixtureSchedule([(0, {"a": 1.0})]), chunk_size=10)
    p = Pipeline(ws).batch(2).options(lanes=2, lane_assignment="permute")
    with pytest.raises(ConfigError, match="draws each lane's data from the lane's own stream"), p:
        next(iter(p))
