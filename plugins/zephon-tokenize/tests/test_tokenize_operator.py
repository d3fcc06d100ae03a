"""The tokenize operator in pipelines: exact ids, BOS/EOS, truncation, 1→n splitting with lineage."""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pytest
from zephon_tokenize import Tokenize, gpt2_tokenizer

from zephon_core import Dataset, OperatorError, Pipeline, StaticMixtureWorkSource
from zephon_core.testing.corpus import english_texts, numbered_records, technical_texts

DOCS = numbered_records(english_texts()[:300] + technical_texts()[:300])


def ragged_collate(rows: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """Keep variable-length ids: concatenated, with each row's length and document number."""
    return {
        "flat": np.concatenate([r["input_ids"] for r in rows]),
        "lengths": np.array([len(r["input_ids"]) for r in rows]),
        "num_tokens": np.array([r["num_tokens"] for r in rows]),
        "doc": np.array([r["doc"] for r in rows]),
    }


def run(docs: list[dict[str, Any]], runner: str = "threads", **tokenize: Any) -> list[Any]:
    ws = StaticMixtureWorkSource([Dataset.from_records("p", docs, shard_size=100)], chunk_size=32)
    pipe = (
        Pipeline(ws)
        .tokenize(tokenizer_id="gpt2", **tokenize)
        .batch(microbatch_size=1, collate=ragged_collate)
        .options(runner=runner)
    )
    with pipe as p:
        return list(p)


def rows(batches: list[Any]) -> list[tuple[int, np.ndarray, tuple[int, ...]]]:
    out = []
    for b in batches:
        lengths = b.data["lengths"].tolist()
        for i, piece in enumerate(np.split(b.data["flat"], np.cumsum(lengths)[:-1])):
            out.append((int(b.data["doc"][i]), piece, b.lineage[i]))
    return out


@pytest.fixture(scope="module")
def reference() -> dict[int, list[int]]:
    tok = gpt2_tokenizer()
    return {d["doc"]: e.ids for d, e in zip(DOCS, tok.encode_batch([d["text"] for d in DOCS]))}


def test_ids_match_the_tokenizer_with_eos(reference):
    got = rows(run(DOCS, parallelism=2))
    assert len(got) == len(DOCS)
    for doc, ids, _ in got:
        assert ids.dtype == np.int32
        assert ids.tolist() == [*reference[doc], 50256]


def test_bos_and_truncation_keep_the_specials(reference):
    got = rows(run(DOCS, add_bos=True, max_length=16))
    for doc, ids, _ in got:
        ref = reference[doc]
        assert len(ids) == min(16, len(ref) + 2)
        assert ids[0] == 50256 and ids[-1] == 50256
        assert ids[1:-1].tolist() == ref[: len(ids) - 2]


@pytest.mark.parametrize("runner", ["inline", "processes"])
def test_split_long_samples_is_one_to_many_with_lineage(reference, runner):
    got = rows(run(DOCS, runner=runner, max_length=40, split_long_samples=True, parallelism=2))
    by_doc: dict[int, list[tuple[np.ndarray, tuple[int, ...]]]] = {}
    for doc, ids, lin in got:
        by_doc.setdefault(doc, []).append((ids, lin))
    assert sorted(by_doc) == sorted(reference)
    split = 0
    for doc, pieces in by_doc.items():
        full = [*reference[doc], 50256]
        assert [len(p) for p, _ in pieces] == [min(40, len(full) - s) for s in range(0, len(full), 40)]
        assert np.concatenate([p for p, _ in pieces]).tolist() == full
        assert len({lin for _, lin in pieces}) == 1, "every piece keeps the document's lineage"
        split += len(pieces) > 1
    assert split > 100, "the corpus has many documents longer than 40 tokens"


def test_worker_pickles_as_json_and_rebuilds_lazily():
    worker = Tokenize(tokenizer_id="gpt2").worker()
    blob = pickle.dumps(worker)
    clone = pickle.loads(blob)
    assert clone._tok is None, "the Rust tokenizer is rebuilt on first use, not unpickled"
    assert len(blob) < len(worker.tokenizer_json.encode()) + 10_000
    assert clone([{"text": "Hello world"}])[0]["input_ids"].tolist() == [15496, 995, 50256]
    assert clone._tok is not None


def test_fields_kept_text_dropped_and_empty_documents_tombstoned():
    docs = [{"text": "Hello", "doc": 0}, {"text": "", "doc": 1}, {"text": "world", "doc": 2}]
    batches = run(docs, add_eos=False)
    assert sorted(int(b.data["doc"][0]) for b in batches) == [0, 2]
    assert sum(len(b.dropped) for b in batches) == 1
    worker = Tokenize(tokenizer_id="gpt2", keep_text=True).worker()
    assert worker([{"text": "Hello"}])[0]["text"] == "Hello"


def test_missing_field_names_the_sample():
    with pytest.raises(OperatorError, match="no field 'body'"):
        run([{"text": "x", "doc": 0}], field="body")
