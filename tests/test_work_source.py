"""The work source: mixture schedule, blockwise shuffle, exhaustion policies, lane-free chunks."""

from __future__ import annotations

import numpy as np
import pytest

from zephon_core import ConfigError, Dataset, MixtureSpec, StaticMixtureWorkSource
from zephon_core.defaults.sources.mixture import RoundRobinSchedule
from zephon_core.defaults.sources.permutation import BlockShuffle


def _ds(name: str, n: int, shard: int = 100) -> Dataset:
    return Dataset.from_records(name, [{"i": i} for i in range(n)], shard_size=shard)


def _brute_swrr(weights: list[int], n: int) -> list[int]:
    """Sequential reference: merge components by ideal time (k + 0.5) / a, ties to lower index."""
    from fractions import Fraction

    events = sorted((Fraction(2 * k + 1, 2 * a), c) for c, a in enumerate(weights) for k in range(n))
    return [c for _, c in events[:n]]


@pytest.mark.parametrize("weights", [[0.75, 0.25], [1, 1, 1], [0.5, 0.3, 0.2], [7, 1], [0.123, 0.877]])
def test_schedule_matches_sequential_reference_and_seeks(weights):
    sch = RoundRobinSchedule(weights)
    n = 3 * sch.period + 17
    comp, draw = sch.take(0, n)
    assert comp.tolist() == _brute_swrr(sch.a.tolist(), n)
    # draw numbers count each component's previous occurrences
    for c in range(len(weights)):
        assert draw[comp == c].tolist() == list(range(int((comp == c).sum())))
    # seeking: any window equals the slice of the long run, and counts_at agrees
    for start in (0, 1, sch.period - 1, sch.period + 5, 2 * sch.period + 3):
        c2, d2 = sch.take(start, 11)
        assert c2.tolist() == comp[start : start + 11].tolist()
        assert d2.tolist() == draw[start : start + 11].tolist()
        assert sch.counts_at(start).tolist() == [int((comp[:start] == c).sum()) for c in range(len(weights))]


def test_every_prefix_stays_close_to_the_mixture():
    sch = RoundRobinSchedule([0.75, 0.25])
    comp, _ = sch.take(0, 10_000)
    share = np.cumsum(comp == 0) / np.arange(1, 10_001)
    assert np.all(np.abs(share[100:] - 0.75) < 0.01)


def test_block_shuffle_is_a_permutation_with_locality():
    sizes = np.array([1000, 37, 512, 1])
    bs = BlockShuffle(sizes, seed=3, name="x", block_size=64, shuffle=True)
    shard, index = bs.locate(0, np.arange(sizes.sum()))
    pairs = set(zip(shard.tolist(), index.tolist()))
    assert len(pairs) == sizes.sum()
    assert all(0 <= i < sizes[s] for s, i in pairs)
    # 64 consecutive positions come from one block of one shard (locality for readers)
    s0, i0 = shard[:64], index[:64]
    assert len(set(zip(s0.tolist(), (i0 // 64).tolist()))) <= 2
    # a new epoch is a different order; the same epoch is the same order
    s1, i1 = bs.locate(1, np.arange(sizes.sum()))
    assert (s1 != shard).any() or (i1 != index).any()
    s2, i2 = bs.locate(0, np.arange(sizes.sum()))
    assert (s2 == shard).all() and (i2 == index).all()


def test_stop_ends_at_first_exhausted_component_with_exact_mixture():
    a, b = _ds("a", 3000), _ds("b", 500)
    ws = StaticMixtureWorkSource([a, b], mixture=MixtureSpec({"a": 0.75, "b": 0.25}), chunk_size=100, seed=1)
    chunks = [ws.chunk(g) for g in range(ws.num_chunks)]
    assert ws.chunk(ws.num_chunks) is None
    ds = np.concatenate([c.dataset for c in chunks])
    assert (ds == 1).sum() == 500 and abs(int((ds == 0).sum()) - 1500) <= 2
    # every sample of b exactly once, no sample of a twice
    pairs = [(int(d), int(s), int(i)) for c in chunks for d, s, i in zip(c.dataset, c.shard, c.index)]
    assert len(set(pairs)) == len(pairs)


def test_repeat_starts_fresh_shuffled_passes():
    ws = StaticMixtureWorkSource([_ds("a", 100, 10)], chunk_size=50, seed=5, exhaustion="repeat")
    assert ws.num_chunks is None
    first = np.concatenate([ws.chunk(0).shard * 10 + ws.chunk(0).index, ws.chunk(1).shard * 10 + ws.chunk(1).index])
    second = np.concatenate([ws.chunk(2).shard * 10 + ws.chunk(2).index, ws.chunk(3).shard * 10 + ws.chunk(3).index])
    assert sorted(first.tolist()) == sorted(second.tolist()) == list(range(100))
    assert first.tolist() != second.tolist()


def test_chunks_are_pure_functions_of_their_number():
    mk = lambda: StaticMixtureWorkSource([_ds("a", 900), _ds("b", 400)], chunk_size=64, seed=9)
    w1, w2 = mk(), mk()
    for g in (7, 3, 0, 12):  # any order, fresh instances
        c1, c2 = w1.chunk(g), w2.chunk(g)
        assert (c1.dataset == c2.dataset).all() and (c1.shard == c2.shard).all() and (c1.index == c2.index).all()
    other_seed = StaticMixtureWorkSource([_ds("a", 900), _ds("b", 400)], chunk_size=64, seed=10)
    assert (other_seed.chunk(0).index != w1.chunk(0).index).any()


def test_source_does_no_payload_io():
    class Exploding(list):
        def __getitem__(self, i):
            raise AssertionError("payload read by the work source")

    ds = Dataset.from_records("a", [{"i": i} for i in range(500)], shard_size=100)
    ds.reader._records = Exploding(ds.reader._records)
    ws = StaticMixtureWorkSource([ds], chunk_size=64)
    assert sum(len(ws.chunk(g)) for g in range(ws.num_chunks)) == 500


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mixture": MixtureSpec({"a": 1.0})}, "no weight for ['b']"),
        ({"mixture": MixtureSpec({"a": 1.0, "b": 1.0, "c": 1.0})}, "unknown datasets ['c']"),
        ({"chunk_size": 0}, "chunk_size"),
        ({"chunk_size": 1 << 17}, "chunk_size"),
        ({"exhaustion": "forever"}, "exhaustion"),
        ({"seed": "x"}, "seed"),
    ],
)
def test_bad_source_configuration(kwargs, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        StaticMixtureWorkSource([_ds("a", 10), _ds("b", 10)], **kwargs)


def test_bad_mixture_weights():
    with pytest.raises(ConfigError, match="'b'"):
        MixtureSpec({"a": 1.0, "b": 0.0})
    with pytest.raises(ConfigError, match="unique"):
        StaticMixtureWorkSource([_ds("a", 10), _ds("a", 10)])


def test_scalar_and_vector_splitmix_agree():
    from zephon_core.hashing import _splitmix64_int, splitmix64

    xs = np.random.default_rng(0).integers(0, 2**63, 1000, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    assert [_splitmix64_int(int(x)) for x in xs] == [int(v) for v in splitmix64(xs)]
