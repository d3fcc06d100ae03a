"""The WorkSource contract is open: a source written here runs through the public API with lanes,
resume and a world-size change, hash-identical across runners; and replay takes window numbers from
the flush sentinels, so a window that delivers nothing at all does not shift resume positions.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from zephon_core import (
    Accumulator,
    BaseWorkSource,
    Chunk,
    ConfigError,
    Dataset,
    Operator,
    Pipeline,
    Records,
    StaticMixtureWorkSource,
    Traits,
    WorkSource,
    dataset_of,
)
from zephon_core.conformance.harness import run_global
from zephon_core.ops.contract import Emitted


class RoundRobin(BaseWorkSource):
    """Alternates between datasets sample by sample, each walked in a stride permutation; ends with the shortest."""

    def __init__(self, datasets: list[Dataset], chunk_size: int = 10, stride: int = 7) -> None:
        super().__init__(datasets)
        self.chunk_size = chunk_size
        self.stride = stride
        self.end = len(datasets) * min(d.num_samples for d in datasets)

    def chunk(self, number: int) -> Chunk | None:
        start = number * self.chunk_size
        stop = min(start + self.chunk_size, self.end)
        if stop <= start:
            return None
        pos = np.arange(start, stop)
        ds, draw = np.divmod(pos, len(self.datasets))[::-1]
        shard = np.empty(len(pos), dtype=np.int64)
        index = np.empty(len(pos), dtype=np.int64)
        for d, dataset in enumerate(self.datasets):
            m = ds == d
            flat = (draw[m] * self.stride) % dataset.num_samples  # a permutation when gcd(stride, n) == 1
            bounds = np.cumsum(dataset.sizes)
            shard[m] = np.searchsorted(bounds, flat, side="right")
            index[m] = flat - np.concatenate([[0], bounds])[shard[m]]
        return Chunk(number, ds.astype(np.int32), shard, index)

    def describe(self) -> dict[str, Any]:
        return {"type": "RoundRobin", "datasets": [d.describe() for d in self.datasets], "chunk": self.chunk_size}


def _sources() -> list[Dataset]:
    a = Dataset.from_records("letters", [{"v": i, "tag": 0} for i in range(300)], shard_size=64)
    b = Dataset.from_records("digits", [{"v": 1000 + i, "tag": 1} for i in range(251)], shard_size=50)
    return [a, b]


def _double(p: dict[str, Any]) -> dict[str, Any] | None:
    return None if p["v"] % 11 == 0 else {"v": np.int64(2 * p["v"]), "tag": np.int8(p["tag"])}


def _build(par: int) -> Pipeline:
    return Pipeline(RoundRobin(_sources())).map_transform(_double, parallelism=par).shuffle(16, seed=2).batch(4)


def test_a_custom_source_satisfies_the_contract():
    src = RoundRobin(_sources())
    assert isinstance(src, WorkSource)
    first = src.chunk(0)
    assert first is not None and first.dataset.tolist()[:4] == [0, 1, 0, 1]
    assert src.chunk(10_000) is None


def test_a_custom_source_is_deterministic_across_runners_world_sizes_and_resume():
    base = run_global(_build, lanes=4, world_size=1, runner="inline", flush_every=2)
    assert len(base.hashes) > 20
    for runner, par, world in [("threads", 3, 2), ("processes", 2, 4)]:
        assert run_global(_build, lanes=4, world_size=world, runner=runner, parallelism=par, flush_every=2).hashes == (
            base.hashes
        ), (runner, par, world)
    cut = len(base.hashes) // 2
    first = run_global(_build, lanes=4, world_size=2, runner="threads", parallelism=2, flush_every=2, steps=cut)
    rest = run_global(_build, lanes=4, world_size=4, runner="processes", flush_every=2, resume=first.state)
    assert first.hashes + rest.hashes == base.hashes


def test_records_carry_their_dataset_in_the_lineage():
    with _build(1).options(lanes=2) as p:
        batch = next(iter(p))
        names = p.datasets_of(batch)
        assert [[n] for n in names[0]] and all(len(row) == 1 for row in names)
        for row, lin in zip(batch.data["tag"].tolist(), batch.lineage):
            assert ["letters", "digits"][row] == p.source.datasets[dataset_of(lin[0])].name


def test_an_object_that_is_not_a_work_source_is_refused_with_what_it_lacks():
    class NotASource:
        datasets = ()

    with pytest.raises(ConfigError, match="lacks .*chunk"):
        Pipeline(NotASource())  # type: ignore[arg-type]


# -- window numbering comes from the sentinels ----------------------------------------------------
CHUNK, K, LANES = 8, 2, 2
FIRST_WINDOWS = CHUNK * K * LANES  # the samples of window 0 of every lane (no shuffle: in order)


class _SilentAccumulator(Accumulator):
    def push(self, records: Records) -> list[Emitted]:
        keep = [j for j, p in enumerate(records.payloads) if p["i"] >= FIRST_WINDOWS]
        if not keep:
            return []  # forwards nothing at all, not even tombstones
        pick = [records.payloads[j] for j in keep], [records.keys[j] for j in keep], [records.lineage[j] for j in keep]
        return [Records(*pick)]


class SilentFirstWindow(Operator):
    """A custom operator that forwards nothing for the whole first window of every lane."""

    kind = "silent_first_window"
    traits = Traits(has_worker=False)

    def config(self) -> dict[str, Any]:
        return {}

    def new_accumulator(self, lane: int) -> Accumulator:
        return _SilentAccumulator()


def _empty_first_window(par: int) -> Pipeline:
    ds = Dataset.from_records("d", [{"i": i} for i in range(400)], shard_size=100)
    ws = StaticMixtureWorkSource([ds], chunk_size=CHUNK, shuffle=False)
    return Pipeline(ws).add(SilentFirstWindow()).batch(3)


def test_a_window_that_delivers_nothing_does_not_shift_replay():
    """Nothing of window 0 of any lane reaches batch; checkpoints taken in later windows must still
    name the right window. (Before replay took window numbers from the sentinels, a counter that
    advanced only once data had arrived was one behind here, and cuts at steps 9 and 59 replayed
    the wrong window.)"""
    base = run_global(_empty_first_window, lanes=LANES, world_size=1, runner="inline", flush_every=K)
    assert len(base.hashes) > 20
    for cut in (1, 4, 9, len(base.hashes) - 2):
        first = run_global(_empty_first_window, lanes=LANES, world_size=1, runner="threads", flush_every=K, steps=cut)
        windows = {ls["window"] for ls in first.state["lanes"].values()}
        assert min(windows) >= 1, "no microbatch holds data of window 0"
        assert len({ls["delivered"] for ls in first.state["lanes"].values()}) == 1
        rest = run_global(
            _empty_first_window, lanes=LANES, world_size=2, runner="threads", flush_every=K, resume=first.state
        )
        assert first.hashes + rest.hashes == base.hashes, f"cut at step {cut}"
