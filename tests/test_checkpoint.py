"""Checkpoints are small plain JSON, bounded by in-flight work rather than progress."""

from __future__ import annotations

import itertools
import json

import pytest

from zephon_core import CheckpointError, Dataset, Pipeline, StaticMixtureWorkSource, merge_checkpoints
from zephon_core.demo import build


def test_state_is_json_and_does_not_grow_with_progress(demo_source):
    sizes = []
    with build(2, source=demo_source).options(lanes=4, flush_every_k_chunks=2) as p:
        it = iter(p)
        for n in (4, 40, 200):
            for _ in itertools.islice(it, n):
                pass
            state = p.state_dict()
            text = json.dumps(state)
            assert json.loads(text) == state
            sizes.append(len(text))
    assert max(sizes) < 4000
    assert max(sizes) - min(sizes) < 600, sizes  # in-flight chunk lists vary; progress does not add up
    assert set(state) >= {"schema", "version", "fingerprint", "definition", "lanes", "multiplexer", "source"}
    lane = state["lanes"]["0"]
    assert set(lane) == {"window", "skip", "delivered", "replay_from_chunk"}


def test_merge_checkpoints_rejects_conflicts_and_foreign_states():
    ds = Dataset.from_records("n", [{"i": i} for i in range(100)], shard_size=10)
    mk = lambda seed, rank: (
        Pipeline(StaticMixtureWorkSource([ds], seed=seed)).batch(2).options(lanes=2, dp_world_size=2, dp_rank=rank)
    )
    s0, s1 = mk(0, 0).state_dict(), mk(0, 1).state_dict()
    merged = merge_checkpoints([s0, s1])
    assert sorted(merged["lanes"]) == ["0", "1"]
    with pytest.raises(CheckpointError, match="different pipelines: source.seed"):
        merge_checkpoints([s0, mk(1, 1).state_dict()])
    bad = json.loads(json.dumps(s0))
    bad["lanes"]["0"]["delivered"] = 5
    with pytest.raises(CheckpointError, match="lane 0 appears in two rank states"):
        merge_checkpoints([s0, bad])
    with pytest.raises(CheckpointError, match="at least one"):
        merge_checkpoints([])
