"""``shuffle(..., algorithm="block"|"block_warmup")``: whole blocks let out permuted; warm-up blocks grow
after every flush. Both pass the operator conformance suite (run here as a third party would)."""

from __future__ import annotations

import functools

import pytest

from zephon_core import ConfigError, Dataset, Pipeline, StaticMixtureWorkSource
from zephon_core.conformance import OperatorConformance
from zephon_core.defaults.operators.shuffle import Shuffle
from zephon_core.ops.contract import Records


def _records(start: int, n: int) -> Records:
    keys = list(range(start, start + n))
    return Records([{"i": k} for k in keys], keys, [(k,) for k in keys])


def _out(emitted) -> list[list[int]]:
    return [[p["i"] for p in r.payloads] for r in emitted if r.payloads]


def test_block_lets_out_each_block_whole_and_permuted():
    acc = Shuffle(8, seed=1, algorithm="block").new_accumulator(0)
    blocks = _out(acc.push(_records(0, 20))) + _out(acc.flush())
    assert [sorted(b) for b in blocks] == [list(range(0, 8)), list(range(8, 16)), list(range(16, 20))]
    assert any(b != sorted(b) for b in blocks)


def test_block_warmup_grows_after_every_flush():
    acc = Shuffle(64, seed=1, algorithm="block_warmup").new_accumulator(0)
    sizes = [len(b) for b in _out(acc.push(_records(0, 200)))]
    assert sizes == [4, 8, 16, 32, 64, 64]
    acc.flush()
    assert [len(b) for b in _out(acc.push(_records(500, 12)))] == [4, 8]


def test_reservoir_stays_the_default_and_out_of_the_fingerprint():
    assert Shuffle(16, seed=3).config() == {"buffer_size": 16, "seed": 3}
    assert Shuffle(16, seed=3, algorithm="block").config()["algorithm"] == "block"
    with pytest.raises(ConfigError, match=r"algorithm must be one of \['reservoir', 'block', 'block_warmup'\]"):
        Shuffle(16, algorithm="fisher")


def test_the_builder_takes_the_algorithm():
    ds = Dataset.from_records("d", [{"i": i} for i in range(64)], shard_size=16)
    p = Pipeline(StaticMixtureWorkSource([ds], chunk_size=16)).shuffle(8, seed=2, algorithm="block").batch(4)
    with p:
        got = sorted(int(x) for b in p for x in b.data["i"])
    assert got == list(range(64))


@pytest.mark.slow
class TestBlockShuffleConformance(OperatorConformance):
    @pytest.fixture
    def operator_factory(self):
        return functools.partial(Shuffle, 16, seed=3, algorithm="block")

    @pytest.fixture
    def sample_records(self):
        # 40 records per lane on the suite's 4 lanes (more than a flush window of 2 chunks of 16) and
        # 79 global steps on the 2 lanes of the every-cut-point resume, so all its cuts (up to step 61)
        # happen; the suite's default 480 only lengthens each of its 40 replays to the end.
        from zephon_core.conformance.samples import text_records

        return text_records(160)


@pytest.mark.slow  # deselected by `-m "not slow"`, which overrides the default `-m "not exhaustive"`
@pytest.mark.exhaustive  # the same accumulator as "block" with a growing block size
class TestBlockWarmupShuffleConformance(OperatorConformance):
    @pytest.fixture
    def operator_factory(self):
        return functools.partial(Shuffle, 16, seed=3, algorithm="block_warmup")
