"""Per-sample randomness: a user function that declares ``rng`` gets a generator seeded from
(operator seed, operator name, record key), so augmentations are the same bits on every runner,
parallelism, world size and after resume, and the global ``random``/``np.random`` stay forbidden."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from zephon_core import Dataset, MixtureSpec, Pipeline, StaticMixtureWorkSource
from zephon_core.conformance import OperatorConformance
from zephon_core.conformance.harness import run_global
from zephon_core.defaults.operators.mapping import FlatMap, MapTransform, rng_base, sample_rng
from zephon_core.defaults.operators.stateful import StatefulTransform
from zephon_core.errors import ConfigError, OperatorError
from zephon_core.hashing import mix64, stable_hash64
from zephon_core.work.ids import DATASET_SHIFT

ROOT = Path(__file__).resolve().parents[1]
LANES = 4
K = 2
KEY_MASK = (1 << DATASET_SHIFT) - 1


# -- module-level user functions (the processes runner pickles them by reference) -------------------
def augment(payload: dict[str, Any], rng: np.random.Generator) -> dict[str, Any]:
    """A map with per-sample randomness: noise, a coin and a random crop of the record's vector."""
    start = int(rng.integers(0, 4))
    return {
        "n": payload["n"],
        "noise": rng.integers(0, 1 << 31, size=4),
        "flip": bool(rng.random() < 0.5),
        "crop": payload["v"][start : start + 4],
    }


def split_random(payload: dict[str, Any], rng: np.random.Generator) -> list[dict[str, Any]]:
    """A flat_map that makes 0 to 2 records, each with its own draw."""
    return [{"n": payload["n"], "noise": rng.integers(0, 1 << 31, size=4)} for _ in range(int(rng.integers(0, 3)))]


def pair_init() -> dict[str, Any]:
    return {"buf": []}


def pair_push(state: dict[str, Any], payload: dict[str, Any], rng: np.random.Generator) -> list[list[int]]:
    """Pairs records; the accumulator's own draw (a tag per record) is seeded by the pushed record's key."""
    state["buf"].append(int(payload["n"]) * 1000 + int(rng.integers(0, 1000)))
    if len(state["buf"]) < 2:
        return []
    row, state["buf"] = state["buf"], []
    return [row]


def pair_flush(state: dict[str, Any]) -> list[list[int]]:
    rows = [state["buf"] + [-1]] if state["buf"] else []
    state["buf"] = []
    return rows


def pair_transform(row: list[int], rng: np.random.Generator) -> dict[str, Any]:
    """The worker side: a draw per output item, seeded by the item's key."""
    return {"ids": np.asarray(row, dtype=np.int64), "noise": rng.standard_normal(3)}


def text_augment(payload: dict[str, Any], rng: np.random.Generator) -> dict[str, Any]:
    """For the conformance suite's text records: a random rotation of the text and a noise vector."""
    text = payload["text"]
    cut = int(rng.integers(0, len(text)))
    return {"text": text[cut:] + text[:cut], "n": payload["n"], "noise": rng.integers(0, 1 << 31, size=2)}


def global_numpy_random(payload: dict[str, Any]) -> dict[str, Any]:
    """The forbidden way: the process-wide numpy generator."""
    return {**payload, "noise": np.random.random()}


def fails_on_seven(payload: dict[str, Any], rng: np.random.Generator) -> dict[str, Any]:
    if payload["n"] == 7:
        raise ValueError("seven is not allowed")
    return {"n": payload["n"], "r": rng.random()}


# -- pipelines ---------------------------------------------------------------------------------------
def _records(n: int, offset: int = 0) -> list[dict[str, Any]]:
    return [{"n": offset + i, "v": np.arange(8, dtype=np.int32) + offset + i} for i in range(n)]


@functools.lru_cache(maxsize=1)
def _source() -> StaticMixtureWorkSource:
    a = Dataset.from_records("a", _records(160), shard_size=40)
    b = Dataset.from_records("b", _records(80, offset=10_000), shard_size=40)
    return StaticMixtureWorkSource([a, b], mixture=MixtureSpec({"a": 2.0, "b": 1.0}), chunk_size=8, seed=5)


def build(parallelism: int, *, seed: int = 0) -> Pipeline:
    """map with rng → shuffle → stateful_transform with rng in push and transform → batch."""
    return (
        Pipeline(_source())
        .apply("map_transform", augment, parallelism=parallelism, seed=seed)
        .shuffle(16, seed=2)
        .stateful_transform(
            "pairs",
            init_state=pair_init,
            push=pair_push,
            flush=pair_flush,
            transform=pair_transform,
            parallelism=parallelism,
            seed=seed,
        )
        .batch(2)
    )


def build_map_only(parallelism: int, *, seed: int = 0, name: str | None = None) -> Pipeline:
    return Pipeline(_source()).apply("map_transform", augment, parallelism=parallelism, seed=seed, name=name).batch(4)


@pytest.fixture(scope="module")
def baseline() -> list[str]:
    hashes = run_global(build, lanes=LANES, runner="inline", flush_every=K).hashes
    assert len(hashes) >= 12
    return hashes


# -- the derivation ------------------------------------------------------------------------------------
def _draws(build_fn: Any, lanes: int) -> dict[int, tuple[int, ...]]:
    """Sample id → the noise its record drew, over a whole run."""
    res = run_global(build_fn, lanes=lanes, runner="inline", flush_every=K, keep_batches=True)
    out: dict[int, tuple[int, ...]] = {}
    for batch in (b for rank in res.batches for b in rank):
        for (sid,), noise in zip(batch.lineage, batch.data["noise"]):
            out[sid] = tuple(noise.tolist())
    return out


def test_generator_is_the_documented_derivation():
    draws = _draws(build_map_only, lanes=2)
    assert len(draws) == 240
    base = rng_base(0, "augment")
    assert base == stable_hash64("zephon.sample_rng", 0, "augment")
    for sid, noise in draws.items():
        key = sid & KEY_MASK  # the record key is the sample id without its dataset bits
        rng = np.random.default_rng(mix64(base, key))  # what sample_rng(base, key) documents itself to be
        rng.integers(0, 4)
        assert tuple(rng.integers(0, 1 << 31, size=4).tolist()) == noise
    assert sample_rng(base, 5).random() == np.random.default_rng(mix64(base, 5)).random()


def test_draws_do_not_depend_on_the_number_of_lanes():
    one, four = _draws(build_map_only, lanes=1), _draws(build_map_only, lanes=4)
    common = one.keys() & four.keys()  # with 4 lanes the run ends at the last complete round
    assert len(common) >= 200 and all(one[s] == four[s] for s in common)


def test_seed_and_operator_name_change_the_draws():
    ref = _draws(build_map_only, lanes=2)
    other_seed = _draws(functools.partial(build_map_only, seed=7), lanes=2)
    other_name = _draws(functools.partial(build_map_only, name="augment_v2"), lanes=2)
    assert ref.keys() == other_seed.keys() == other_name.keys()
    for other in (other_seed, other_name):
        assert sum(ref[s] == other[s] for s in ref) == 0


def test_two_steps_with_the_same_function_draw_independently():
    q = Pipeline(_source()).apply("map_transform", augment).apply("map_transform", augment)
    _, first, second = q.operators
    assert (first.name, second.name) == ("augment", "augment_2")
    assert first.worker().rng_base != second.worker().rng_base


def text_free_copy(payload: dict[str, Any]) -> dict[str, Any]:
    return payload


# -- determinism ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("runner", "parallelism", "world_size"),
    [
        ("inline", 3, 2),
        ("threads", 1, 4),
        ("threads", 3, 1),
        ("threads", 3, 2),
        ("threads", 3, 4),
        ("processes", 3, 1),
        pytest.param("processes", 1, 2, marks=pytest.mark.slow),
        pytest.param("processes", 3, 4, marks=pytest.mark.slow),
    ],
)
def test_same_global_batches(baseline, runner, parallelism, world_size):
    got = run_global(build, lanes=LANES, world_size=world_size, runner=runner, parallelism=parallelism, flush_every=K)
    assert got.hashes == baseline


@pytest.mark.parametrize(("before", "after"), [(2, 4), (4, 1)])
def test_resume_on_another_world_size(baseline, before, after):
    for cut in (1, len(baseline) // 3, (2 * len(baseline)) // 3 + 1):
        first = run_global(build, lanes=LANES, world_size=before, runner="threads", flush_every=K, steps=cut)
        rest = run_global(
            build, lanes=LANES, world_size=after, runner="threads", parallelism=2, flush_every=K, resume=first.state
        )
        assert first.hashes + rest.hashes == baseline, f"cut at step {cut}"


def test_seed_changes_the_batches(baseline):
    assert run_global(functools.partial(build, seed=1), lanes=LANES, flush_every=K).hashes != baseline


def test_flat_map_gets_a_generator_per_record():
    def run(runner: str, par: int) -> list[str]:
        return run_global(
            lambda p: Pipeline(_source()).apply("flat_map", split_random, parallelism=p).batch(4),
            lanes=LANES,
            runner=runner,
            parallelism=par,
            flush_every=K,
        ).hashes

    ref = run("inline", 1)
    assert len(ref) > 5 and run("threads", 3) == ref


# -- configuration ------------------------------------------------------------------------------------
def test_config_names_rng_and_seed_only_when_used():
    assert MapTransform(text_free_copy).config() == {"fn": f"{__name__}:text_free_copy"}  # fingerprints unchanged
    assert MapTransform(augment, seed=3).config() == {"fn": f"{__name__}:augment", "rng": True, "seed": 3}
    assert FlatMap(split_random).config()["rng"] is True
    op = StatefulTransform("pairs", init_state=pair_init, push=pair_push, flush=pair_flush, transform=pair_transform)
    assert op.config()["rng"] == ["push", "transform"] and op.config()["seed"] == 0
    plain = StatefulTransform("p", init_state=pair_init, push=lambda s, p: [], transform=text_free_copy)
    assert "rng" not in plain.config() and "seed" not in plain.config()


def test_bad_seed_or_signature_is_a_config_error():
    with pytest.raises(ConfigError, match="declares no parameter named 'rng'"):
        MapTransform(text_free_copy, seed=1)
    with pytest.raises(ConfigError, match="seed must be an int"):
        MapTransform(augment, seed=True)
    with pytest.raises(ConfigError, match="neither push nor transform takes rng"):
        StatefulTransform("p", init_state=pair_init, push=lambda s, p: [], seed=2)

    def positional_only(payload, rng, /):
        return payload

    with pytest.raises(ConfigError, match="positional-only"):
        MapTransform(positional_only)


def test_a_failure_names_the_sample():
    recs = [{"n": i} for i in range(16)]
    ws = StaticMixtureWorkSource([Dataset.from_records("d", recs)], chunk_size=16, shuffle=False)
    with Pipeline(ws).apply("map_transform", fails_on_seven).batch(4) as p, pytest.raises(OperatorError) as err:
        list(p)
    assert "d[shard 0" in str(err.value) and "index 7" in str(err.value) and "seven" in str(err.value)


# -- the conformance suite ---------------------------------------------------------------------------
@pytest.mark.slow
class TestRngMapConformance(OperatorConformance):
    """A map that draws from its rng passes every rule, including rule 3."""

    @pytest.fixture
    def operator_factory(self):
        return functools.partial(MapTransform, text_augment, seed=4)

    @pytest.fixture
    def sample_records(self):
        from zephon_core.conformance.samples import text_records

        return text_records(160)


def _pytest(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )


@pytest.mark.slow
def test_rule_3_still_rejects_the_global_numpy_generator(tmp_path):
    test_file = tmp_path / "test_global_random.py"
    test_file.write_text(
        "import functools, pytest\n"
        "from zephon_core.conformance import OperatorConformance\n"
        "from zephon_core.conformance.samples import text_records\n"
        "from zephon_core.defaults.operators.mapping import MapTransform\n"
        "import tests.test_sample_rng as t\n"
        "class TestGlobalNumpy(OperatorConformance):\n"
        "    @pytest.fixture\n"
        "    def operator_factory(self):\n"
        "        return functools.partial(MapTransform, t.global_numpy_random)\n"
        "    @pytest.fixture\n"
        "    def sample_records(self):\n"
        "        return text_records(64)\n"
    )
    out = _pytest(str(test_file), "--rootdir", str(tmp_path), "-k", "global_random_state")
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-2000:]
    assert "[rule 3: randomness comes from the data]" in out.stdout, out.stdout[-3000:]
