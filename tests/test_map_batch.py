"""``Pipeline.map_batch(fn)``: a function over collated microbatches, run in the batch stage's workers,
with a per-microbatch ``rng`` that is the same on every runner, world size and resume."""

from __future__ import annotations

import numpy as np
import pytest

from zephon_core import ConfigError, Dataset, Pipeline, StaticMixtureWorkSource, ZephonError
from zephon_core.conformance.harness import run_global

LANES = 4


def mask_tokens(batch: dict, rng: np.random.Generator) -> dict:
    """BERT-style masking of a random 15% of positions: batch-level randomness."""
    x = batch["x"].copy()
    x[rng.random(x.shape) < 0.15] = -1
    return {"x": x, "total": batch["x"].sum(axis=1)}


def as_float(batch: dict) -> dict:
    return {k: v.astype(np.float32) for k, v in batch.items()}


def _build(par: int) -> Pipeline:
    ds = Dataset.from_records("d", [{"x": np.arange(i, i + 16)} for i in range(1200)], shard_size=100)
    ws = StaticMixtureWorkSource([ds], chunk_size=24, seed=2)
    return (
        Pipeline(ws)
        .shuffle(32, seed=1)
        .batch(6, parallelism=par)
        .map_batch(mask_tokens, seed=5)
        .map_batch(as_float)
    )


@pytest.fixture(scope="module")
def base() -> list[str]:
    res = run_global(_build, lanes=LANES, flush_every=2)
    assert len(res.hashes) == 48
    return res.hashes


def test_the_maps_run_in_order_with_per_batch_draws():
    res = run_global(_build, lanes=LANES, flush_every=2, keep_batches=True)
    batches = [b for r in res.batches for b in r]
    first = batches[0].data
    assert first["x"].dtype == np.float32 and first["total"].dtype == np.float32
    masked = [(b.data["x"] == -1).mean() for b in batches]
    assert 0.08 < float(np.mean(masked)) < 0.22
    assert len({(b.data["x"] == -1).tobytes() for b in batches}) > 40  # draws differ per microbatch


@pytest.mark.parametrize(("runner", "par", "world"), [("threads", 2, 2), ("processes", 2, 4)])
def test_same_batches_on_every_runner_and_world_size(base, runner, par, world):
    assert run_global(_build, lanes=LANES, world_size=world, runner=runner, parallelism=par, flush_every=2).hashes == base


def test_resume_on_another_world_size(base):
    first = run_global(_build, lanes=LANES, world_size=4, runner="threads", flush_every=2, steps=17)
    rest = run_global(_build, lanes=LANES, world_size=2, runner="threads", flush_every=2, resume=first.state)
    assert first.hashes + rest.hashes == base


def test_misuse_is_named():
    ds = Dataset.from_records("d", [{"x": i} for i in range(10)], shard_size=5)
    p = Pipeline(StaticMixtureWorkSource([ds]))
    with pytest.raises(ConfigError, match=r"call batch\(\.\.\.\) first"):
        p.map_batch(as_float)
    p = Pipeline(StaticMixtureWorkSource([ds], chunk_size=5)).batch(5).map_batch(lambda b: [b], name="listify")
    with pytest.raises(ZephonError, match="map_batch 'listify' must return a dict of arrays, got list"), p:
        next(iter(p))
    plain = Pipeline(StaticMixtureWorkSource([ds])).batch(5).definition()
    assert "maps" not in plain["operators"][-1]["config"]
