"""Defaults that work on a small corpus: small chunks (a fast first batch) and windows sized in tokens.

A smoke-test corpus smaller than one default window (about half a million GPT-2 tokens, Parquet
paragraphs and JSON Lines sentences mixed 70:30 in tokens) must run on 4 and 32 lanes with the
defaults, to its end with ``exhaustion="stop"``; the window still holds enough tokens that a flush
pads little. Timings are in ``benchmarks/bench_first_batch.py``, not here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from zephon_core import Dataset, MixtureSpec, Pipeline, StaticMixtureWorkSource, ZephonError
from zephon_core.work.chunking import DEFAULT_CHUNK_SIZE, DEFAULT_FLUSH_EVERY, DEFAULT_WINDOW_TOKENS

pytest.importorskip("zephon_tokenize")
pytest.importorskip("zephon_pack")
pytest.importorskip("zephon_parquet")
pytest.importorskip("zephon_jsonl")

WORDS = "the of and to in a is that for it as was with be by on not he this are or his from at which".split()


def _sentence(i: int, n: int) -> str:
    return " ".join(WORDS[(i * 7 + k * 13) % len(WORDS)] + ("s" if (i + k) % 5 == 0 else "") for k in range(n))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """2,115 paragraphs as Parquet and 10,141 lines as JSON Lines (the size of a typical smoke test)."""
    root = tmp_path_factory.mktemp("smoke")
    paras, lines = root / "paragraphs", root / "lines"
    paras.mkdir()
    lines.mkdir()
    texts = [_sentence(i, 120 + i % 90) for i in range(2115)]
    pq.write_table(pa.table({"text": texts}), paras / "part-0.parquet", row_group_size=512)
    with open(lines / "part-0.jsonl", "w", encoding="utf-8") as f:
        for i in range(10141):
            f.write(json.dumps({"text": _sentence(i, 6 + i % 12)}) + "\n")
    return paras, lines


def _pipeline(corpus: tuple[Path, Path], lanes: int, exhaustion: str) -> Pipeline:
    ws = StaticMixtureWorkSource(
        [Dataset.from_path("paragraphs", str(corpus[0])), Dataset.from_path("lines", str(corpus[1]))],
        mixture=MixtureSpec({"paragraphs": 0.7, "lines": 0.3}),
        weight_by="tokens",
        exhaustion=exhaustion,
        seed=3,
    )
    return (
        Pipeline(ws)
        .tokenize(tokenizer_id="gpt2")
        .pack_sequences(target_length=2048)
        .batch(microbatch_size=2)
        .options(lanes=lanes, runner="threads")
    )


@pytest.mark.parametrize("lanes", [4, 32])
def test_a_corpus_smaller_than_one_window_runs_to_its_end_with_the_defaults(corpus, lanes: int) -> None:
    p = _pipeline(corpus, lanes, "stop")
    with p:
        steps = sum(1 for _ in p) // lanes
    assert steps >= 1
    assert p.flush_every > DEFAULT_FLUSH_EVERY  # windows sized in tokens, chunks small


def test_default_chunks_are_small_and_windows_hold_the_default_tokens(corpus) -> None:
    p = _pipeline(corpus, 4, "repeat")
    source = p._active_source()
    assert source.chunk_size == DEFAULT_CHUNK_SIZE
    assert p.token_estimates is not None
    fewest = source._fewest_tokens_per_sample()
    assert p.flush_every * source.chunk_size * fewest >= DEFAULT_WINDOW_TOKENS
    assert (p.flush_every - 1) * source.chunk_size * fewest < DEFAULT_WINDOW_TOKENS
    assert p.definition()["flush_every_k_chunks"] == "auto"


def test_the_old_default_chunk_size_fails_this_corpus_and_the_error_names_chunk_size(corpus) -> None:
    """What release 0.1's default did (chunks sized for windows of 8): the error now names the cause."""
    p = _pipeline(corpus, 32, "stop")
    p.source.chunk_setting = "auto"  # release 0.1's default sizing
    p.options(flush_every_k_chunks=DEFAULT_FLUSH_EVERY)
    with p, pytest.raises(ZephonError, match="chunk_size"):
        for _ in p:
            pass


def test_an_explicit_window_is_kept(corpus) -> None:
    p = _pipeline(corpus, 4, "repeat").options(flush_every_k_chunks=3)
    assert p.flush_every == 3
    assert p.definition()["flush_every_k_chunks"] == 3
