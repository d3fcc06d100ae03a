"""Trainer-steered mixtures: ``pipeline.update_mixture`` replayed exactly.

Updates are made at several global steps — including right before a checkpoint and right after a
resume — and every run (inline / threads / processes, 1 / 2 / 4 ranks, resumed on another world
size) must give the global batches of the uninterrupted single-rank run with the same updates.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from zephon_curricula import MixtureSchedule, ScheduledMixtureWorkSource

from zephon_core import (
    CheckpointError,
    ConfigError,
    Dataset,
    MixtureSpec,
    Pipeline,
    SampleBatch,
    StaticMixtureWorkSource,
    hash_global_batch,
    merge_checkpoints,
)
from zephon_core.demo import build, corpus

LANES, K = 4, 2
UPDATES = {
    3: {"paragraphs": 0.2, "sentences": 0.8},
    11: {"paragraphs": 0.9, "sentences": 0.1},
    24: {"paragraphs": 0.5, "sentences": 0.5},
}


def _source() -> ScheduledMixtureWorkSource:
    """A fresh source per pipeline: load_state_dict restores the update log into the source object."""
    paragraphs, sentences = corpus()
    schedule = MixtureSchedule(
        [(0, {"paragraphs": 0.75, "sentences": 0.25}), (1_600, {"paragraphs": 0.4, "sentences": 0.6})]
    )
    return ScheduledMixtureWorkSource(
        [Dataset.from_records("paragraphs", paragraphs, 500), Dataset.from_records("sentences", sentences, 1000)],
        schedule=schedule,
        chunk_size=32,
        seed=1234,
    )


def _build(par: int) -> Pipeline:
    return build(par, source=_source())


def run_steered(
    make: Callable[[int], Pipeline],
    *,
    world_size: int,
    runner: str,
    parallelism: int = 1,
    updates: Mapping[int, Mapping[str, float]],
    resume: dict[str, Any] | None = None,
    steps: int | None = None,
    update_at_end: bool = True,
) -> tuple[list[str], dict[str, Any] | None]:
    """Every rank of a world, updating the mixture after global step ``s`` for each ``s`` in ``updates``.

    A resumed run applies the update of its first step (right after the resume) unless the run that
    took the checkpoint already did (``update_at_end`` there: right before the checkpoint).
    """
    per = LANES // world_size
    per_rank: list[list[SampleBatch]] = []
    states = []
    for rank in range(world_size):
        opts = {"lanes": LANES, "dp_rank": rank, "dp_world_size": world_size, "runner": runner}
        with make(parallelism).options(flush_every_k_chunks=K, **opts) as p:
            start = 0
            if resume is not None:
                p.load_state_dict(resume)
                start = min(lane["delivered"] for lane in resume["lanes"].values())
                done = {u["step"] for u in resume["source"]["updates"]}
                if start in updates and start not in done:
                    p.update_mixture(updates[start])  # right after the resume
            elif 0 in updates:
                p.update_mixture(updates[0])
            got: list[SampleBatch] = []
            it = iter(p)
            step = start
            while steps is None or step < start + steps:
                round_ = list(itertools.islice(it, per))
                if len(round_) < per:
                    break
                got += round_
                step += 1
                last = steps is not None and step == start + steps
                if step in updates and (update_at_end or not last):
                    p.update_mixture(updates[step])
            if steps is not None:
                states.append(p.state_dict())
        per_rank.append(got)
    n = min(len(b) // per for b in per_rank)
    hashes = [hash_global_batch([b for r in per_rank for b in r[t * per : (t + 1) * per]]) for t in range(n)]
    return hashes, merge_checkpoints(states) if states else None


@pytest.fixture(scope="module")
def baseline() -> list[str]:
    hashes, _ = run_steered(_build, world_size=1, runner="inline", updates=UPDATES)
    assert len(hashes) > 40
    return hashes


def test_updates_change_the_data_from_their_effect_on(baseline):
    plain, _ = run_steered(_build, world_size=1, runner="inline", updates={})
    assert plain[:3] == baseline[:3], "nothing changes before the first update"
    assert plain != baseline


@pytest.mark.parametrize(
    ("runner", "parallelism", "world_size"),
    [("threads", 2, 1), ("processes", 2, 2), ("inline", 1, 4), ("threads", 3, 4), ("processes", 1, 1)],
)
def test_same_batches_on_every_runner_and_world_size(baseline, runner, parallelism, world_size):
    hashes, _ = run_steered(_build, world_size=world_size, runner=runner, parallelism=parallelism, updates=UPDATES)
    assert hashes == baseline


@pytest.mark.parametrize(
    ("cut", "before", "after", "update_at_end"),
    [
        (11, 2, 4, True),  # update right before the checkpoint
        (11, 4, 1, False),  # the same update right after the resume
        (24, 1, 2, False),  # right after a resume, later in the run
        (17, 2, 1, True),  # no update at the cut
        (3, 4, 2, True),
    ],
)
def test_resume_on_another_world_size_replays_the_updates(baseline, cut, before, after, update_at_end):
    head, state = run_steered(
        _build,
        world_size=before,
        runner="threads",
        parallelism=2,
        updates=UPDATES,
        steps=cut,
        update_at_end=update_at_end,
    )
    assert head == baseline[:cut]
    assert len(state["source"]["updates"]) == sum(s < cut or (s == cut and update_at_end) for s in UPDATES)
    tail, _ = run_steered(
        _build, world_size=after, runner="processes" if after > 1 else "inline", updates=UPDATES, resume=state
    )
    assert head + tail == baseline, f"cut at {cut}, {before}->{after} ranks"


def test_the_update_log_is_in_the_checkpoint_and_each_lane_knows_where_it_applies():
    with _build(1).options(lanes=LANES, flush_every_k_chunks=K, runner="inline") as p:
        it = iter(p)
        for _ in range(5 * LANES):
            next(it)
        p.update_mixture({"paragraphs": 1.0})
        state = p.state_dict()
    assert state["source"]["updates"] == [{"step": 5, "weights": {"paragraphs": 1.0, "sentences": 0.0}}]
    for lane in state["lanes"].values():
        (chunk,) = lane["source"]["update_chunks"]
        assert chunk == (lane["window"] + 2) * K  # the window after the lane's resume window, plus the lead


def test_the_feeder_never_runs_past_the_lead():
    lead = 2
    with _build(2).options(lanes=LANES, flush_every_k_chunks=K, runner="threads") as p:
        for i, _ in enumerate(p):
            eng = p._engine
            for lane in range(LANES):
                limit = (eng.mux.resume[lane].window + lead) * K
                assert eng.feeder.next_local[lane] <= limit, (i, lane)
            if i > 200:
                break


def test_shares_follow_the_update():
    a = Dataset.from_records("a", [{"x": i} for i in range(40_000)], 1000)
    b = Dataset.from_records("b", [{"x": -i} for i in range(40_000)], 1000)
    ws = ScheduledMixtureWorkSource([a, b], chunk_size=64, exhaustion="repeat")
    rows: list[list[str]] = []
    with Pipeline(ws).batch(64).options(lanes=2, flush_every_k_chunks=2, runner="inline") as p:
        for i, batch in enumerate(p):
            rows.append([n for row in p.datasets_of(batch) for n in row])
            if i == 21:  # after 11 whole rounds of 2 lanes
                p.update_mixture({"a": 0.1, "b": 0.9})
            if i == 200:
                break
    late = [n for r in rows[60:] for n in r]
    assert abs(late.count("b") / len(late) - 0.9) < 0.01
    early = [n for r in rows[:20] for n in r]
    assert abs(early.count("b") / len(early) - 0.5) < 0.02


def test_errors_say_what_to_do():
    ds = Dataset.from_records("a", [{"x": i} for i in range(1000)], 100)
    static = Pipeline(StaticMixtureWorkSource([ds], mixture=MixtureSpec({"a": 1.0}))).batch(4)
    with pytest.raises(ConfigError, match="ScheduledMixtureWorkSource"):
        static.update_mixture({"a": 1.0})
    steered = Pipeline(ScheduledMixtureWorkSource([ds], chunk_size=16)).batch(4).options(lanes=2, runner="inline")
    with pytest.raises(ConfigError, match="unknown datasets"):
        steered.update_mixture({"b": 1.0})
    with steered as p:
        next(iter(p))  # lane 0 delivered one more microbatch than lane 1
        with pytest.raises(ConfigError, match="between rounds"):
            p.update_mixture({"a": 1.0})


def test_a_checkpoint_with_a_bad_update_log_is_refused():
    with _build(1).options(lanes=LANES, flush_every_k_chunks=K, runner="inline") as p:
        it = iter(p)
        for _ in range(LANES):
            next(it)
        p.update_mixture({"paragraphs": 1.0})
        state = p.state_dict()
    bad = dict(state, lanes={k: dict(v, source={"update_chunks": []}) for k, v in state["lanes"].items()})
    with pytest.raises(CheckpointError, match="update_chunks"):
        _build(1).options(lanes=LANES, flush_every_k_chunks=K).load_state_dict(bad)
    worse = dict(state, source={"updates": [{"step": 1, "weights": {"nope": 1.0}}]})
    with pytest.raises(CheckpointError, match="unknown datasets"):
        _build(1).options(lanes=LANES, flush_every_k_chunks=K).load_state_dict(worse)
    _build(1).options(lanes=LANES, flush_every_k_chunks=K).load_state_dict(state)


def test_merging_ranks_that_disagree_on_the_update_log_is_refused():
    """One rank steered the mixture, the other did not: taking rank 0's log would resume the other
    rank's lanes with another run, so ``merge_checkpoints`` names the field and the ranks."""
    states = []
    for rank in (0, 1):
        p = _build(1).options(lanes=LANES, dp_rank=rank, dp_world_size=2, flush_every_k_chunks=K)
        if rank == 0:
            p.update_mixture({"paragraphs": 0.1, "sentences": 0.9})
        states.append(p.state_dict())
    with pytest.raises(CheckpointError, match=r"disagree on 'source'.*rank\(s\) 0: .*rank\(s\) 1: "):
        merge_checkpoints(states)
