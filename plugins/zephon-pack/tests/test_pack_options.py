"""Packing options: ``best_fit_wrap`` with its pool and age bound, ``group_by``,
``max_sequences_per_bin``, ``drop_oversized``, ``length_fn`` and ``order``. Checked: no token lost
or duplicated (dropped documents appear as tombstones), groups never share a row, caps and the age
bound hold, configs change only when an option is used, clear errors, and identical global batches
across runners, parallelism, world sizes and a resume on another world size."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from zephon_pack import PackSequences
from zephon_pack.checking import TOKEN_STRIDE, check_packed_rows, collect, token_documents, token_source
from zephon_pack.testing import push_lengths, row_fills

from zephon_core import ConfigError, Dataset, Pipeline, Records, StaticMixtureWorkSource
from zephon_core.conformance import OperatorConformance
from zephon_core.conformance.harness import run_global
from zephon_core.work.ids import datasets_of

TARGET = 512


@pytest.fixture(scope="module")
def docs():
    out = token_documents(600, seed=11)
    for d in out:
        d["lang"] = ("en", "fr", "de")[d["doc"] % 3]
    return out


def first_100(payload):
    """A module-level ``length_fn``: pack at most the first 100 tokens of each document."""
    return min(len(payload["input_ids"]), 100)


def one_too_many(payload):
    return len(payload["input_ids"]) + 1


def _rows(batches):
    return {k: np.concatenate([b.data[k] for b in batches]) for k in batches[0].data}


def _run(docs, **kw):
    pipe = (
        Pipeline(token_source(docs))
        .pack_sequences(target_length=TARGET, **kw)
        .batch(microbatch_size=1)
        .options(lanes=1, flush_every_k_chunks=3)
    )
    batches = collect(pipe)
    return pipe, batches, _rows(batches)


def _docs_of_rows(rows):
    """The document numbers in each row (from the token values)."""
    out = []
    for ids, seg in zip(rows["input_ids"], rows["document_ids"]):
        out.append(sorted({int(t) // TOKEN_STRIDE for t in ids[seg >= 0]}))
    return out


def _dropped(pipe, batches):
    return {ptr.shard * 300 + ptr.index for b in batches for lin in b.dropped for ptr in map(pipe.source.pointer, lin)}


@pytest.mark.parametrize(
    "kw",
    [
        {"algorithm": "best_fit_wrap"},
        {"algorithm": "best_fit_wrap", "candidate_pool_size": 4, "max_candidate_age": 8, "order": "length"},
        pytest.param({"algorithm": "best_fit_wrap", "order": "random", "seed": 3}, marks=pytest.mark.exhaustive),
        {"algorithm": "wrap", "order": "random", "order_window": 40},
        {"algorithm": "best_fit", "order": "length", "order_window": 64},
    ],
)
def test_best_fit_wrap_and_orders_keep_every_token_once(docs, kw):
    _, _, rows = _run(docs, **kw)
    check_packed_rows(rows, docs, TARGET, whole=kw["algorithm"] == "best_fit")
    assert rows["num_padding"].sum() / rows["input_ids"].size < 0.1


def test_best_fit_wrap_places_tightest_then_wraps_into_the_emptiest_row():
    acc = PackSequences(10, "best_fit_wrap", candidate_pool_size=2).new_accumulator(0)
    assert push_lengths(acc, [6, 5, 3, 4]) == []
    assert acc.state()["fills"] == [9, 9]  # 3 went to the 6 (tightest), 4 to the 5
    # a 7 fits nowhere and the pool is full: it tops up the emptiest row (tie: the oldest), then goes on in a new row
    assert row_fills(push_lengths(acc, [7], start=4)) == [[6, 3, 1]]
    assert acc.state() == {"fills": [9, 6], "ages": [3, 0]}
    # a long document: it tops up the emptiest row, then fills whole rows, and its tail stays open
    assert row_fills(push_lengths(acc, [23], start=5)) == [[6, 4], [10]]
    assert acc.state()["fills"] == [9, 9]


def test_max_candidate_age_closes_old_rows_padded():
    acc = PackSequences(100, "best_fit_wrap", candidate_pool_size=4, max_candidate_age=2).new_accumulator(0)
    assert push_lengths(acc, [50, 60, 70]) == []
    assert row_fills(push_lengths(acc, [80], start=3)) == [[50]]  # open for 3 > 2 further documents
    assert acc.state() == {"fills": [60, 70, 80], "ages": [2, 1, 0]}
    # the age bound holds through a real pipeline: no row waits longer than the bound in documents
    acc = PackSequences(512, "best_fit_wrap", candidate_pool_size=8, max_candidate_age=5).new_accumulator(0)
    lengths = [int(n) for n in np.random.default_rng(0).integers(1, 400, 300)]  # test data only
    for i, n in enumerate(lengths):
        push_lengths(acc, [n], start=i)
        assert all(a <= 5 for a in acc.state()["ages"])


def test_group_by_field_and_dataset_keep_rows_homogeneous(docs):
    pipe, batches, rows = _run(docs, algorithm="best_fit_wrap", group_by="lang")
    check_packed_rows(rows, docs, TARGET, whole=False)
    assert all(len({d % 3 for d in row}) == 1 for row in _docs_of_rows(rows))

    two = StaticMixtureWorkSource(
        [
            Dataset.from_records("a", docs[:300], shard_size=100),
            Dataset.from_records("b", docs[300:], shard_size=100),
        ],
        chunk_size=40,
        seed=3,
    )
    pipe = (
        Pipeline(two)
        .pack_sequences(TARGET, "first_fit", group_by="dataset", num_open_bins=4)
        .batch(microbatch_size=1)
        .options(lanes=1, flush_every_k_chunks=2)
    )
    batches = collect(pipe)
    check_packed_rows(_rows(batches), docs, TARGET, whole=True)
    for b in batches:
        assert len(set(datasets_of(b.lineage[0]))) == 1
        assert len({d >= 300 for d in _docs_of_rows(b.data)[0]}) == 1


def test_max_sequences_per_bin_caps_documents_per_row(docs):
    for algorithm in ("wrap", "best_fit", "best_fit_wrap"):
        _, _, rows = _run(docs, algorithm=algorithm, max_sequences_per_bin=2)
        check_packed_rows(rows, docs, TARGET, whole=algorithm == "best_fit")
        assert rows["document_ids"].max() == 1, algorithm


def test_drop_oversized_leaves_tombstones_and_length_fn_truncates(docs):
    pipe, batches, rows = _run(docs, algorithm="first_fit", drop_oversized=True)
    long = {d for d, doc in enumerate(docs) if len(doc["input_ids"]) > TARGET}
    empty = {d for d, doc in enumerate(docs) if len(doc["input_ids"]) == 0}
    assert long and _dropped(pipe, batches) == long | empty
    kept = [doc if d not in long else {"input_ids": doc["input_ids"][:0]} for d, doc in enumerate(docs)]
    check_packed_rows(rows, kept, TARGET, whole=True)

    pipe, batches, rows = _run(docs, algorithm="best_fit_wrap", length_fn=first_100)
    check_packed_rows(rows, [{"input_ids": d["input_ids"][:100]} for d in docs], TARGET, whole=False)
    assert PackSequences(8, length_fn=first_100).config()["length_fn"] == f"{__name__}:first_100"


def test_random_order_depends_on_the_seed_only(docs):
    a = _run(docs[:200], algorithm="best_fit", order="random", seed=1)[2]
    b = _run(docs[:200], algorithm="best_fit", order="random", seed=1)[2]
    c = _run(docs[:200], algorithm="best_fit", order="random", seed=2)[2]
    assert np.array_equal(a["input_ids"], b["input_ids"])
    assert not np.array_equal(a["input_ids"], c["input_ids"])


def test_defaults_leave_the_config_unchanged():
    base = {
        "target_length",
        "algorithm",
        "num_open_bins",
        "allow_split",
        "pad_id",
        "field",
        "ignore_index",
        "mask_document_boundaries",
    }
    for algorithm in ("wrap", "first_fit", "best_fit"):
        assert set(PackSequences(8, algorithm).config()) == base
    cfg = PackSequences(8, "best_fit_wrap", order="random", group_by="dataset").config()
    assert cfg["candidate_pool_size"] == 16 and cfg["order"] == "random" and cfg["seed"] == 0
    assert cfg["group_by"] == "dataset" and "max_candidate_age" not in cfg


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"algorithm": "best_fit", "candidate_pool_size": 4}, "candidate_pool_size"),
        ({"algorithm": "wrap", "max_candidate_age": 4}, "max_candidate_age"),
        ({"algorithm": "best_fit_wrap", "max_candidate_age": 0}, "max_candidate_age"),
        ({"algorithm": "best_fit_wrap", "allow_split": False}, "always splits"),
        ({"group_by": ""}, "group_by"),
        ({"group_by": "input_ids"}, "group_by"),
        ({"max_sequences_per_bin": 0}, "max_sequences_per_bin"),
        ({"drop_oversized": 1}, "drop_oversized"),
        ({"length_fn": lambda p: 3}, "length_fn"),
        ({"order": "shortest"}, "order"),
        ({"order": "length", "order_window": 0}, "order_window"),
        ({"seed": "x"}, "seed"),
    ],
)
def test_bad_options_are_clear_errors(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        PackSequences(8, **kwargs)


def test_bad_records_name_the_option():
    acc = PackSequences(8, group_by="lang").new_accumulator(0)
    with pytest.raises(ConfigError, match="group_by='lang'.*no field"):
        acc.push(Records([{"input_ids": np.arange(3)}], [1], [(1,)]))
    acc = PackSequences(8, length_fn=one_too_many).new_accumulator(0)
    with pytest.raises(ConfigError, match="length_fn .*one_too_many returned 4 for a document of 3 tokens"):
        acc.push(Records([{"input_ids": np.arange(3)}], [1], [(1,)]))


# -- determinism -----------------------------------------------------------------------------------
LANES = 4
K = 2


def _mixed(docs):
    return StaticMixtureWorkSource(
        [Dataset.from_records("a", docs[:250], shard_size=125), Dataset.from_records("b", docs[250:], shard_size=125)],
        chunk_size=25,
        seed=4,
    )


BUILDS = {
    "best_fit_wrap": {
        "algorithm": "best_fit_wrap",
        "candidate_pool_size": 6,
        "max_candidate_age": 12,
        "order": "length",
    },
    "group_by": {
        "algorithm": "best_fit_wrap",
        "group_by": "dataset",
        "max_sequences_per_bin": 4,
        "drop_oversized": True,
        "order": "random",
        "order_window": 30,
    },
}


def _builder(docs, kw, parallelism):
    return Pipeline(_mixed(docs)).pack_sequences(256, parallelism=parallelism, **kw).batch(microbatch_size=2)


@pytest.fixture(scope="module", params=sorted(BUILDS))
def determinism(request, docs):
    build = functools.partial(_builder, docs[:500], BUILDS[request.param])
    hashes = run_global(build, lanes=LANES, flush_every=K).hashes
    assert len(hashes) >= 6 and len(set(hashes)) == len(hashes)
    return build, hashes


@pytest.mark.parametrize(
    ("runner", "parallelism", "world_size"),
    [("threads", 2, 2), pytest.param("inline", 2, 4, marks=pytest.mark.exhaustive), ("processes", 2, 1)],
)
def test_same_global_batches_everywhere(determinism, runner, parallelism, world_size):
    build, baseline = determinism
    got = run_global(build, lanes=LANES, world_size=world_size, runner=runner, parallelism=parallelism, flush_every=K)
    assert got.hashes == baseline


def test_resume_on_another_world_size(determinism):
    build, baseline = determinism
    first = run_global(build, lanes=LANES, world_size=2, runner="threads", parallelism=2, flush_every=K, steps=3)
    assert first.state is not None and first.hashes == baseline[:3]
    assert any(ls["skip"] > 0 for ls in first.state["lanes"].values()), "cut inside a window"
    rest = run_global(build, lanes=LANES, world_size=4, runner="inline", flush_every=K, resume=first.state)
    assert first.hashes + rest.hashes == baseline


# -- the kernel's conformance suite on best_fit_wrap -----------------------------------------------
@pytest.mark.slow
class TestBestFitWrapConformance(OperatorConformance):
    @pytest.fixture
    def operator_factory(self):
        return functools.partial(
            PackSequences, 128, "best_fit_wrap", candidate_pool_size=4, max_candidate_age=6, order="random"
        )

    @pytest.fixture
    def sample_records(self):
        return token_documents(480, seed=7, mean=40, longest=400)
