"""``batch(..., drop_last=False)``: each lane's last rows become a final, smaller microbatch, the same on
every world size, runner and resume."""

from __future__ import annotations

import numpy as np
import pytest

from zephon_core import ConfigError, Dataset, Pipeline, StaticMixtureWorkSource
from zephon_core.conformance.harness import run_global

LANES = 4


def _build(par: int, drop_last: bool = False) -> Pipeline:
    ds = Dataset.from_records("d", [{"i": i} for i in range(1003)], shard_size=100)
    ws = StaticMixtureWorkSource([ds], chunk_size=25, seed=7)
    return Pipeline(ws).map_transform(_keep, parallelism=par).batch(8, drop_last=drop_last)


def _keep(p: dict) -> dict:
    return {"i": p["i"] * 1}


@pytest.fixture(scope="module")
def base():
    res = run_global(_build, lanes=LANES, flush_every=3, keep_batches=True)
    return res


def test_every_record_is_delivered_and_the_last_round_is_partial(base):
    batches = [b for rank in base.batches for b in rank]
    ids = np.concatenate([b.data["i"] for b in batches])
    assert sorted(ids.tolist()) == list(range(1003))  # lanes of 253, 250, 250, 250 rows: 31 full + 1 partial each
    last = sorted(batches, key=lambda b: (b.lane_index, b.lane))[-LANES:]
    sizes = [len(b.data["i"]) for b in last]
    assert sorted(sizes) == [2, 2, 2, 5], sizes
    with _build(1, drop_last=True).options(lanes=LANES) as p:
        kept = sum(len(b.data["i"]) for b in p)
    assert kept == len(ids) - sum(sizes)  # drop_last=True leaves exactly the partial microbatches over


@pytest.mark.parametrize(("runner", "par", "world"), [("threads", 2, 2), ("processes", 2, 4)])
def test_same_global_batches_everywhere(base, runner, par, world):
    res = run_global(_build, lanes=LANES, world_size=world, runner=runner, parallelism=par, flush_every=3)
    assert res.hashes == base.hashes


def test_resume_just_before_the_partial_round_on_another_world_size(base):
    n = len(base.hashes)
    for cut in (n - 1, n - 3):
        first = run_global(_build, lanes=LANES, world_size=2, runner="threads", flush_every=3, steps=cut)
        rest = run_global(_build, lanes=LANES, world_size=4, runner="threads", flush_every=3, resume=first.state)
        assert first.hashes + rest.hashes == base.hashes, cut


def test_drop_last_is_validated_and_in_the_fingerprint_only_when_false():
    with pytest.raises(ConfigError, match="drop_last must be True or False"):
        Pipeline(StaticMixtureWorkSource([Dataset.from_records("d", [{"i": 1}], 1)])).batch(2, drop_last="no")
    assert _build(1).definition()["operators"][-1]["config"]["drop_last"] is False
    assert "drop_last" not in _build(1, drop_last=True).definition()["operators"][-1]["config"]
