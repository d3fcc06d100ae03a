"""Cross-shard shuffling: every mode is an exact permutation per epoch, a pure
function of (seed, epoch, position), with the promised quality on a label-sorted dataset, and the
source says which shards its chunks read."""

from __future__ import annotations

import numpy as np
import pytest
from zephon_testkit.shuffle_quality import chi2_sf, files_per_chunk, source_labels, window_quality

from zephon_core import ConfigError, Dataset, MixtureSpec, Pipeline, StaticMixtureWorkSource, hash_arrays
from zephon_core.defaults.sources.feistel import FeistelPermutation
from zephon_core.defaults.sources.permutation import BlockShuffle
from zephon_core.defaults.sources.shuffle import AUTO_MAX_GROUP, AUTO_SHARDS, auto_group, make_order
from zephon_core.work.readers import MemoryReader

MODES = ["shard", 700, "auto", "global"]


def _sorted_by_label(shards: int = 20, per: int = 500) -> Dataset:
    """Shard ``s`` holds label ``s``: the order files are often written in (by domain, date, …)."""
    return Dataset.from_records("d", [{"label": i // per} for i in range(shards * per)], shard_size=per)


@pytest.mark.parametrize("n", [1, 2, 3, 17, 1000, 4096, 10_007])
def test_feistel_is_a_bijection_of_any_domain(n):
    perm = FeistelPermutation(n, key=11)(np.arange(n))
    assert sorted(perm.tolist()) == list(range(n))
    assert (FeistelPermutation(n, key=11)(np.arange(n)[::-1]) == perm[::-1]).all(), "pointwise, any order"
    if n > 16:
        assert (FeistelPermutation(n, key=12)(np.arange(n)) != perm).any()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("sizes", [[1000, 37, 512, 1], [500] * 20, [3], [64, 64, 65]])
def test_every_mode_is_a_permutation_per_epoch_and_pointwise(mode, sizes):
    sizes = np.array(sizes)
    order = make_order(sizes, 3, "x", mode, True)
    total = int(sizes.sum())
    first = order.locate(0, np.arange(total))
    for epoch in (0, 1):
        shard, index = order.locate(epoch, np.arange(total))
        pairs = list(zip(shard.tolist(), index.tolist()))
        assert len(set(pairs)) == total and all(0 <= i < sizes[s] for s, i in pairs)
        # any subset of positions, in any order, from a fresh instance: the same answers
        pick = np.random.default_rng(epoch).permutation(total)[: max(1, total // 3)]
        s2, i2 = make_order(sizes, 3, "x", mode, True).locate(epoch, pick)
        assert (s2 == shard[pick]).all() and (i2 == index[pick]).all()
    if total > 8:
        assert (first[0] != shard).any() or (first[1] != index).any(), "each epoch has its own order"


def test_shard_mode_is_the_order_of_zephon_core_0_1():
    sizes = np.array([1000, 37, 2512, 1])
    old = BlockShuffle(sizes, seed=9, name="x", block_size=1024, shuffle=True)
    new = make_order(sizes, 9, "x", "shard", True)
    pos = np.arange(sizes.sum())
    assert all((a == b).all() for a, b in zip(old.locate(2, pos), new.locate(2, pos)))


def test_no_shuffle_keeps_file_order_in_every_mode():
    sizes = np.array([5, 7, 3])
    for mode in MODES:
        shard, index = make_order(sizes, 1, "x", mode, False).locate(0, np.arange(15))
        assert shard.tolist() == [0] * 5 + [1] * 7 + [2] * 3 and index.tolist() == [*range(5), *range(7), *range(3)]


def test_auto_groups_span_about_eight_shards_capped_by_samples():
    assert auto_group(np.array([500] * 20)) == AUTO_SHARDS
    assert auto_group(np.array([10**6] * 40)) == AUTO_MAX_GROUP // 10**6
    assert auto_group(np.array([10**8] * 3)) == 1


def test_bad_block_size_is_refused():
    ds = _sorted_by_label(2, 10)
    for bad in ("blocks", 0, -3, 2.5, True):
        with pytest.raises(ConfigError, match="shuffle_block_size must be"):
            StaticMixtureWorkSource([ds], shuffle_block_size=bad)


def test_quality_on_a_label_sorted_dataset():
    """The issue's measurement: 20 shards x 500 samples, shard s holds label s, windows of 1,024."""
    ds = _sorted_by_label()
    quality = {}
    for mode in MODES:
        ws = StaticMixtureWorkSource([ds], chunk_size=256, seed=0, shuffle_block_size=mode)
        quality[mode] = window_quality(source_labels(ws, lambda d, s, i: s), 1024)
    assert quality["shard"].min_distinct <= 4  # the problem: one shard at a time
    assert quality["auto"].min_distinct >= 8  # every window of 1,024 holds at least 8 labels
    assert quality["global"].min_distinct == 20
    assert quality["global"].share_uniform >= 0.8  # p > 0.01 on most windows
    assert quality["shard"].share_uniform == quality["auto"].share_uniform == 0.0


@pytest.mark.parametrize("seed", range(5))
def test_auto_holds_eight_labels_for_any_seed(seed):
    ws = StaticMixtureWorkSource([_sorted_by_label()], chunk_size=256, seed=seed, exhaustion="repeat")
    assert window_quality(source_labels(ws, lambda d, s, i: s, limit=30_000), 1024).min_distinct >= 8


def test_chi2_survival_function_matches_known_values():
    # reference values of the chi-square distribution (e.g. scipy.stats.chi2.sf)
    assert chi2_sf(30.1435, 19) == pytest.approx(0.05, abs=1e-4)
    assert chi2_sf(36.1909, 19) == pytest.approx(0.01, abs=1e-4)
    assert chi2_sf(3.8415, 1) == pytest.approx(0.05, abs=1e-4)
    assert chi2_sf(0.0, 5) == 1.0


def test_locality_cost_grows_with_the_reach_of_the_shuffle():
    ds = _sorted_by_label()
    files = {m: files_per_chunk(StaticMixtureWorkSource([ds], chunk_size=256, shuffle_block_size=m)) for m in MODES}
    assert files["shard"] < 2 < files[700] and files["auto"] <= 3.5 and files["global"] > 15


def test_shards_for_names_exactly_the_files_of_the_chunks():
    a, b = _sorted_by_label(), Dataset.from_records("e", [{"x": i} for i in range(3000)], shard_size=300)
    ws = StaticMixtureWorkSource([a, b], mixture=MixtureSpec({"d": 1.0, "e": 1.0}), chunk_size=64, seed=4)
    need = ws.shards_for([5, 9, 10_000])
    want: dict[str, set[int]] = {}
    for g in (5, 9):
        ch = ws.chunk(g)
        for d, s in zip(ch.dataset.tolist(), ch.shard.tolist()):
            want.setdefault(["d", "e"][d], set()).add(s)
    assert need == {k: sorted(v) for k, v in sorted(want.items())}
    assert StaticMixtureWorkSource([a, b], chunk_size=64, seed=4).shards_for([]) == {}


def test_default_is_auto_and_the_fingerprint_says_which_mode():
    ds = _sorted_by_label(4, 10)
    described = {m: StaticMixtureWorkSource([ds], shuffle_block_size=m).describe()["shuffle_block_size"] for m in MODES}
    assert StaticMixtureWorkSource([ds]).describe()["shuffle_block_size"] == "auto"
    assert described == {"shard": 1024, 700: {"across_shards": 700}, "auto": "auto", "global": "global"}


class _RecordingReader(MemoryReader):
    """An in-memory reader that records what it is asked to prefetch (as a remote-file reader would warm)."""

    def __init__(self, records: list[dict], shard_size: int) -> None:
        super().__init__(records, shard_size)
        self.prefetched: list[list[int]] = []

    def prefetch(self, shards) -> None:
        self.prefetched.append(list(shards))


def test_readers_prefetch_exactly_the_shards_of_each_lanes_next_chunk():
    records = [{"label": i // 100} for i in range(4000)]
    reader = _RecordingReader(records, 100)
    ws = StaticMixtureWorkSource([Dataset("d", reader)], chunk_size=64, seed=2)
    plain = StaticMixtureWorkSource([Dataset.from_records("d", records, 100)], chunk_size=64, seed=2)
    lanes = 2
    with Pipeline(ws).batch(16).options(lanes=lanes, runner="inline") as p:
        got = [hash_arrays(b.to_training()) for b in p]
    with Pipeline(plain).batch(16).options(lanes=lanes, runner="inline") as p:
        assert got == [hash_arrays(b.to_training()) for b in p], "prefetch changes timing only"
    # every chunk but each lane's first is announced, with exactly the shards it reads
    expected = [sorted(set(ws.chunk(g).shard.tolist())) for g in range(lanes, ws.num_chunks)]
    assert sorted(reader.prefetched) == sorted(expected)


def test_a_lanes_next_chunks_are_announced_several_ahead():
    """A distant store needs time: handing out a lane's chunk announces that lane's next several chunks."""
    from zephon_core.work.prefetch import LOOKAHEAD_CHUNKS, with_lookahead

    records = [{"label": i // 100} for i in range(8000)]
    reader = _RecordingReader(records, 100)
    ws = StaticMixtureWorkSource([Dataset("d", reader)], chunk_size=64, seed=2)
    lanes = 2
    fed = with_lookahead(ws, lanes)
    assert fed.chunk(0) is not None
    ahead = [sorted(set(ws.chunk(k * lanes).shard.tolist())) for k in range(1, LOOKAHEAD_CHUNKS + 1)]
    assert LOOKAHEAD_CHUNKS >= 4 and reader.prefetched == ahead
    assert fed.chunk(lanes) is not None  # the next one announces only the chunk that entered the horizon
    assert reader.prefetched[len(ahead) :] == [sorted(set(ws.chunk((LOOKAHEAD_CHUNKS + 1) * lanes).shard.tolist()))]
