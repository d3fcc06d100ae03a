"""Stage fusion on the processes runner (zephon_core/runtime/fusion.py).

Fusion must be invisible in the data: the same batches (hashed), lineage and tombstones, in the same
order, as the unfused pipeline and the threads runner, with records dropped at the fetch (a reader
that skips), at the first map and at a later one, and with maps that draw from a per-record
generator. Visible only in bookkeeping: one stage in the metrics, errors still naming the step.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from zephon_core import ConfigError, Dataset, OperatorError, Pipeline, Reader, ShardInfo, StaticMixtureWorkSource
from zephon_core.ops.contract import Accumulator, Emitted, Operator, Records, Traits, Work

N = 300


class SkippingReader(Reader):
    """Sample ``i`` is ``{"x": [i]*4, "i": i}``; every 7th one does not decode and is skipped (a tombstone)."""

    format = "test-skipping"

    def __init__(self, n: int, shard_size: int = 64) -> None:
        self.n = n
        self.shard_size = shard_size

    def shards(self) -> list[ShardInfo]:
        s = self.shard_size
        return [ShardInfo(f"s{k}", min(s, self.n - k * s)) for k in range(-(-self.n // s))]

    def read(self, shard: int, indices: np.ndarray) -> list[dict[str, Any]]:
        return [{"x": np.full(4, shard * self.shard_size + i, np.int64), "i": shard * self.shard_size + i} for i in indices]

    def read_or_skip(self, shard: int, indices: np.ndarray) -> list[dict[str, Any] | None]:
        rows = self.read(shard, indices)
        return [None if r["i"] % 7 == 3 else r for r in rows]


def drop_fives(p: dict[str, Any]) -> dict[str, Any] | None:
    return None if p["i"] % 5 == 0 else p


def jitter(p: dict[str, Any], rng: np.random.Generator) -> dict[str, Any]:
    return {**p, "x": p["x"] + rng.integers(0, 1000, 4)}


def drop_elevens(p: dict[str, Any]) -> dict[str, Any] | None:
    return None if p["i"] % 11 == 0 else p


def explode_on_41(p: dict[str, Any]) -> dict[str, Any]:
    if p["i"] == 41:
        raise ValueError("bad record")
    return p


def _pipeline(runner: str, *, fuse: bool = True, n: int = N) -> Pipeline:
    ws = StaticMixtureWorkSource([Dataset("nums", SkippingReader(n))], chunk_size=16, seed=0)
    p = Pipeline(ws).map_transform(drop_fives, parallelism=2).map_transform(jitter, seed=3)
    return p.map_transform(drop_elevens).batch(8).options(runner=runner, lanes=2, fuse=fuse)


def _run(p: Pipeline) -> tuple[list[tuple[str, list[Any], list[Any]]], list[tuple[str, str, int]]]:
    with p:
        out = [(b.sha256(), b.lineage, b.dropped) for b in p]
        stages = [(s["name"], s["runner"], s["parallelism"]) for s in p.metrics()["stages"]]
    return out, stages


def test_fused_steps_give_the_same_batches_lineage_and_tombstones():
    fused, fused_stages = _run(_pipeline("processes"))
    unfused, unfused_stages = _run(_pipeline("processes", fuse=False))
    threads, _ = _run(_pipeline("threads"))
    assert fused_stages == [("fetch+drop_fives+jitter+drop_elevens", "processes", 2), ("batch", "threads", 1)]
    assert [s[0] for s in unfused_stages] == ["fetch", "drop_fives", "jitter", "drop_elevens", "batch"]
    assert fused == unfused == threads
    dropped = [lin for _, _, d in threads for lin in d]
    assert len(dropped) > 60  # the three kinds of tombstone all occur, interleaved within tasks
    assert len(fused) >= 16


def test_tombstones_keep_the_unfused_order_step_by_step():
    """Within one task, the fetch's tombstones come before the first map's, which come before the
    second's (the order unfused stages make): a slot-ordered list would differ from it."""
    _, _, dropped = zip(*_run(_pipeline("processes", n=64))[0])
    flat = [lin for d in dropped for lin in d]
    unfused = [lin for _, _, d in _run(_pipeline("threads", n=64))[0] for lin in d]
    assert flat == unfused
    assert flat != sorted(flat)  # the step order is not the slot order here, so the check can fail


def test_a_failing_fused_step_is_named_with_its_sample():
    ws = StaticMixtureWorkSource([Dataset("nums", SkippingReader(N))], chunk_size=16, seed=0)
    p = Pipeline(ws).map_transform(drop_fives).map_transform(explode_on_41).batch(8).options(runner="processes")
    with p, pytest.raises(OperatorError) as info:
        list(p)
    msg = str(info.value)
    assert "operator 'explode_on_41' (worker, fused into 'fetch+drop_fives+explode_on_41')" in msg
    # 35, 38 and 40 were dropped before it in its task: its position among the map's inputs is not its slot
    assert "nums[shard 0 (s0), index 41]" in msg and "ValueError: bad record" in msg


def test_fusion_stops_at_a_stateful_step_or_another_runner():
    ws = StaticMixtureWorkSource([Dataset("nums", SkippingReader(N))], chunk_size=16, seed=0)
    p = (
        Pipeline(ws)
        .map_transform(drop_fives)
        .shuffle(32)
        .map_transform(drop_elevens, parallelism=2)
        .map_transform(jitter, runner="threads")
        .batch(8)
        .options(runner="processes")
    )
    _, stages = _run(p)
    assert stages == [
        ("fetch+drop_fives", "processes", 1),
        ("shuffle", "processes", 1),
        ("drop_elevens", "processes", 2),
        ("jitter", "threads", 1),
        ("batch", "threads", 1),
    ]


def test_fuse_option_is_checked():
    ws = StaticMixtureWorkSource([Dataset("nums", SkippingReader(N))], chunk_size=16, seed=0)
    with pytest.raises(ConfigError, match="option fuse must be True or False"):
        Pipeline(ws).batch(8).options(fuse="yes")


def test_an_unpicklable_fused_step_is_named():
    ws = StaticMixtureWorkSource([Dataset("nums", SkippingReader(N))], chunk_size=16, seed=0)
    p = Pipeline(ws).map_transform(drop_fives).map_transform(lambda x: x, name="local").batch(8)
    with pytest.raises(ConfigError, match=r"operator 'local' \(fused into 'fetch\+drop_fives\+local'\).*cannot be pickled"):
        iter(p.options(runner="processes"))
    p.close()


def test_a_step_with_its_own_timeout_runs_in_its_own_pool():
    ws = StaticMixtureWorkSource([Dataset("nums", SkippingReader(N))], chunk_size=16, seed=0)
    p = Pipeline(ws).map_transform(drop_fives).map_transform(drop_elevens, timeout_s=30).map_transform(jitter)
    _, stages = _run(p.batch(8).options(runner="processes", timeout_s=100))
    assert stages == [
        ("fetch+drop_fives", "processes", 1),
        ("drop_elevens", "processes", 1),
        ("jitter", "processes", 1),  # a new group may start after it (here of one step)
        ("batch", "threads", 1),
    ]


class OwnPassThrough(Accumulator):
    """A third-party accumulator (not the kernel's PassThrough) that declares it passes through."""

    passes_through = True
    with_keys = False

    def push(self, records: Records) -> list[Emitted]:
        if not records.payloads:
            return [records] if records.dropped else []
        return [Work(records.payloads, records.keys, records.lineage, records.dropped)]


def add_seven(payloads: list[dict[str, Any]]) -> list[dict[str, Any] | None]:
    return [None if p["i"] % 13 == 0 else {**p, "x": p["x"] + 7} for p in payloads]


class AddSeven(Operator):
    """A third-party operator on its own pass-through accumulator (drops every 13th record)."""

    kind = "test_add_seven"
    traits = Traits(fanout="one")

    def config(self) -> dict[str, Any]:
        return {}

    def new_accumulator(self, lane: int) -> Accumulator:
        return OwnPassThrough()

    def worker(self) -> Any:
        return add_seven


def test_a_third_party_pass_through_accumulator_is_fused():
    def build(runner: str) -> Pipeline:
        ws = StaticMixtureWorkSource([Dataset("nums", SkippingReader(N))], chunk_size=16, seed=0)
        p = Pipeline(ws).map_transform(drop_fives).add(AddSeven(name="add_seven")).map_transform(drop_elevens)
        return p.batch(8).options(runner=runner, lanes=2)

    fused, stages = _run(build("processes"))
    threads, _ = _run(build("threads"))
    assert stages == [("fetch+drop_fives+add_seven+drop_elevens", "processes", 1), ("batch", "threads", 1)]
    assert fused == threads
    assert any(lin for _, _, d in fused for lin in d)
