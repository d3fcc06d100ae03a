"""Global batch hashes pinned as literal values, so a refactor of the kernel is provably order-neutral.

Every other determinism test compares runs *with each other*; a change that alters every run in the
same way passes them all. These digests were computed before the kernel restructuring (issue 9) and
must only change when a change of the data is intended and said so (for example a new default
shuffle), in which case the new digests are pasted here in the same commit.

Each pin is the SHA-256 of the concatenated per-step global batch digests, plus the step count.
"""

from __future__ import annotations

import hashlib

import pytest

from zephon_core import Dataset, MixtureSpec, Pipeline, StaticMixtureWorkSource
from zephon_core.conformance.harness import run_global
from zephon_core.demo import build, corpus, make_source


def _digest(hashes: list[str]) -> tuple[int, str]:
    return len(hashes), hashlib.sha256("".join(hashes).encode()).hexdigest()


def _kernel_builder(par: int) -> Pipeline:
    return build(par, source=make_source(chunk_size=32))


def _flat(payload: dict) -> list[dict]:
    """1 → 0..2 records, keyed on content (module level: picklable for processes)."""
    n = len(payload["text"]) % 3
    return [{"n": len(payload["text"]) + j, "doc": payload["doc"]} for j in range(n)]


def _flat_builder(par: int) -> Pipeline:
    paragraphs, sentences = corpus()
    ws = StaticMixtureWorkSource(
        [Dataset.from_records("p", paragraphs[:1500], shard_size=300), Dataset.from_records("s", sentences[:900], 250)],
        mixture=MixtureSpec({"p": 2.0, "s": 1.0}),
        chunk_size=48,
        seed=99,
        exhaustion="repeat",
    )
    return Pipeline(ws).flat_map(_flat, parallelism=par).shuffle(buffer_size=40, seed=3).batch(microbatch_size=6)


PINS = {
    "kernel_demo": (117, "4589dc6bfea0b74be4f3cb74ce262c6a385851e0d291d2a58d9d16913e5b43c1"),
    "kernel_demo_resumed": (117, "4589dc6bfea0b74be4f3cb74ce262c6a385851e0d291d2a58d9d16913e5b43c1"),
    "flat_map_repeat": (60, "bbddeb31be9b6ecde69d42a133d369168e477b904fce3427bf15814bf92ab857"),
    "text_pipeline": (6, "3f7078da5d42e95aef5114414f210e2bdd15c8aaa81779002746b4c4ab393d7b"),
}


def test_kernel_demo_pinned():
    res = run_global(_kernel_builder, lanes=4, world_size=1, runner="inline", flush_every=2)
    assert _digest(res.hashes) == PINS["kernel_demo"]


def test_kernel_demo_resumed_on_other_world_size_pinned():
    first = run_global(_kernel_builder, lanes=4, world_size=2, runner="threads", parallelism=2, flush_every=2, steps=37)
    rest = run_global(_kernel_builder, lanes=4, world_size=4, runner="threads", flush_every=2, resume=first.state)
    assert _digest(first.hashes + rest.hashes) == PINS["kernel_demo_resumed"]


def test_flat_map_repeat_pinned():
    res = run_global(_flat_builder, lanes=2, world_size=1, runner="threads", parallelism=2, flush_every=3, steps=60)
    assert _digest(res.hashes) == PINS["flat_map_repeat"]


def _text_builder(par: int) -> Pipeline:
    paragraphs, sentences = corpus()
    ws = StaticMixtureWorkSource(
        [Dataset.from_records("p", paragraphs, shard_size=400), Dataset.from_records("s", sentences, 700)],
        mixture=MixtureSpec({"p": 0.6, "s": 0.4}),
        chunk_size=64,
        seed=5,
        weight_by="tokens",
    )
    return (
        Pipeline(ws)
        .tokenize(tokenizer_id="gpt2", parallelism=par)
        .pack_sequences(target_length=512, parallelism=par)
        .ensure_mixture()
        .batch(microbatch_size=4)
    )


def test_text_pipeline_pinned():
    pytest.importorskip("zephon_tokenize")
    pytest.importorskip("zephon_pack")
    res = run_global(_text_builder, lanes=4, world_size=1, runner="threads", parallelism=2, flush_every=4, steps=6)
    assert _digest(res.hashes) == PINS["text_pipeline"]


def test_text_pipeline_resumed_pinned():
    pytest.importorskip("zephon_tokenize")
    pytest.importorskip("zephon_pack")
    first = run_global(_text_builder, lanes=4, world_size=2, runner="threads", flush_every=4, steps=2)
    rest = run_global(_text_builder, lanes=4, world_size=4, runner="inline", flush_every=4, resume=first.state, steps=4)
    assert _digest(first.hashes + rest.hashes) == PINS["text_pipeline"]
