"""Packing correctness: every token once and in order, for every algorithm, through real pipelines."""

from __future__ import annotations

import numpy as np
import pytest
from zephon_pack import PackSequences, segment_spans
from zephon_pack.assemble import PackWorker
from zephon_pack.checking import TOKEN_STRIDE, check_packed_rows, collect, token_documents, token_source
from zephon_pack.testing import push_lengths, row_fills

from zephon_core import ConfigError, Pipeline, Records
from zephon_core.conformance.harness import run_global

VARIANTS = [("wrap", None), ("first_fit", False), ("first_fit", True), ("best_fit", False), ("best_fit", True)]
TARGET = 512


@pytest.fixture(scope="module")
def docs():
    return token_documents(1500, seed=1)


def _rows(batches):
    return {k: np.concatenate([b.data[k] for b in batches]) for k in batches[0].data}


@pytest.mark.parametrize(("algorithm", "allow_split"), VARIANTS)
def test_every_token_exactly_once_in_order(docs, algorithm, allow_split):
    pipe = (
        Pipeline(token_source(docs))
        .pack_sequences(
            target_length=TARGET, algorithm=algorithm, num_open_bins=8, allow_split=allow_split, parallelism=2
        )
        .batch(microbatch_size=1)
        .options(lanes=1, flush_every_k_chunks=3)  # one lane: a run ends with whole rounds, and we want every row
    )
    batches = collect(pipe)
    rows = _rows(batches)
    check_packed_rows(rows, docs, TARGET, whole=algorithm != "wrap" and not allow_split)

    # lineage: one entry per segment, naming the document the segment's tokens came from
    for b in batches:
        segs = b.data["document_ids"][0]
        ids = b.data["input_ids"][0]
        pointers = pipe.explain(b)[0]
        assert len(pointers) == int(segs.max()) + 1
        for j, ptr in enumerate(pointers):
            doc = ptr.shard * 300 + ptr.index
            assert int(ids[np.argmax(segs == j)]) // TOKEN_STRIDE == doc
    # empty documents are dropped with a tombstone, not lost
    dropped = {
        ptr.shard * 300 + ptr.index for b in batches for lin in b.dropped for ptr in map(pipe.source.pointer, lin)
    }
    assert dropped == {d for d, doc in enumerate(docs) if len(doc["input_ids"]) == 0}
    padding = rows["num_padding"].sum() / rows["input_ids"].size
    if algorithm == "wrap":
        # padding only in the one partial row per window: 30 chunks, 3 per window
        assert (rows["num_padding"] > 0).sum() <= 10
    assert padding < 0.2


def test_first_fit_and_best_fit_choose_different_bins():
    ff = PackSequences(10, "first_fit", num_open_bins=2).new_accumulator(0)
    bf = PackSequences(10, "best_fit", num_open_bins=2).new_accumulator(0)
    for acc in (ff, bf):
        assert push_lengths(acc, [5, 6, 3]) == []
    assert ff.state() == {"fills": [8, 6]}  # 3 went to the first bin with room
    assert bf.state() == {"fills": [5, 9]}  # 3 went to the tightest bin
    # a 7 fits nowhere: the fullest bin leaves padded
    assert row_fills(push_lengths(ff, [7], start=3)) == [[5, 3]]
    assert ff.state() == {"fills": [6, 7]}


def test_allow_split_tops_up_the_leaving_bin():
    acc = PackSequences(10, "first_fit", num_open_bins=2, allow_split=True).new_accumulator(0)
    push_lengths(acc, [5, 6, 3])
    out = push_lengths(acc, [7], start=3)
    assert row_fills(out) == [[5, 3, 2]]  # no padding: the 7 gave its first 2 tokens
    assert acc.state() == {"fills": [6, 5]}
    rows = PackWorker(10, 0)(out[0].task)
    assert rows[0]["num_padding"] == 0
    assert list(rows[0]["document_ids"]) == [0] * 5 + [1] * 3 + [2] * 2


@pytest.mark.parametrize(("algorithm", "allow_split"), VARIANTS)
def test_flush_emits_everything_and_long_documents_fill_whole_rows(algorithm, allow_split):
    op = PackSequences(100, algorithm, num_open_bins=4, allow_split=allow_split)
    acc = op.new_accumulator(0)
    lengths = [250, 30, 70, 99, 1, 45, 60]
    out = push_lengths(acc, lengths) + acc.flush()
    rows = [r for item in out for r in op.worker()(item.task)]
    assert sum(100 - int(r["num_padding"]) for r in rows) == sum(lengths)
    full = [r for r in rows if r["num_padding"] == 0 and (r["input_ids"] // 1000 == 0).all()]
    assert len(full) >= 2, "a 250-token document gives two whole rows of its own"
    assert op.new_accumulator(0).state() in ({"fill": 0}, {"fills": []}), "a fresh lane state is empty"


def test_same_rows_on_every_runner_and_world_size(docs):
    def build(parallelism):
        return (
            Pipeline(token_source(docs[:600]))
            .pack_sequences(target_length=256, algorithm="best_fit", parallelism=parallelism)
            .batch(microbatch_size=4)
        )

    base = run_global(build, lanes=2, flush_every=2)
    assert len(base.hashes) > 20
    for runner, par, ws in (("threads", 3, 2), ("processes", 2, 1)):
        assert (
            run_global(build, lanes=2, world_size=ws, runner=runner, parallelism=par, flush_every=2).hashes
            == base.hashes
        )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"target_length": 0}, "target_length"),
        ({"target_length": 8, "algorithm": "next_fit"}, "algorithm"),
        ({"target_length": 8, "allow_split": False}, "always splits"),
        ({"target_length": 8, "algorithm": "best_fit", "num_open_bins": 0}, "num_open_bins"),
        ({"target_length": 8, "pad_id": 2**40}, "int32"),
    ],
)
def test_bad_configuration_is_a_clear_error(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        PackSequences(**kwargs)


def test_missing_field_names_the_field():
    acc = PackSequences(8).new_accumulator(0)
    with pytest.raises(ConfigError, match="no field 'input_ids'"):
        acc.push(Records([{"text": "x"}], [1], [(1,)]))


@pytest.mark.parametrize(("algorithm", "allow_split"), [("wrap", None), ("first_fit", True)])
def test_rows_name_every_document_and_a_split_document_in_each_row(algorithm, allow_split):
    op = PackSequences(10, algorithm, num_open_bins=1, allow_split=allow_split)
    acc = op.new_accumulator(0)
    out = push_lengths(acc, [4, 15, 3]) + acc.flush()
    rows = [r for item in out for r in op.worker()(item.task)]
    lineage = [lin for item in out for lin in item.lineage]
    spans = [segment_spans(r["document_ids"], lin) for r, lin in zip(rows, lineage)]
    if algorithm == "wrap":  # 4 | 15 | 3 tokens cut every 10: document 1 spans rows 0 and 1
        assert lineage == [(0, 1), (1, 2), (2,)]
        assert spans == [[(0, 0, 4), (1, 4, 10)], [(1, 0, 9), (2, 9, 10)], [(2, 0, 2)]]
    else:  # one bin: document 1 first fills a row alone, its tail joins document 0, document 2 tops it up
        assert lineage == [(1,), (0, 1, 2), (2,)]
        assert spans == [[(1, 0, 10)], [(0, 0, 4), (1, 4, 9), (2, 9, 10)], [(2, 0, 2)]]
    for sp, r in zip(spans, rows):
        assert sum(b - a for _, a, b in sp) == 10 - int(r["num_padding"])
    with pytest.raises(ValueError, match="segments"):
        segment_spans(rows[0]["document_ids"], (*lineage[0], 7))
