"""Global batch hashes pinned as literal values, so a refactor of the kernel is provably order-neutral.

Every other determinism test compares runs *with each other*; a change that alters every run in the
same way passes them all. These digests were computed before the kernel was restructured and must only
change when a change of the data is intended and said so (for example a new default shuffle), in
which case the new digests are pasted here in the same commit, and the old ones are kept beside the
setting that still gives them.

Each pin is the SHA-256 of the concatenated per-step global batch digests, plus the step count.

zephon-core 0.1 shuffled in blocks inside one shard; the default ``shuffle_block_size="auto"``
(blocks spanning about 8 shards) changed every pin below on purpose. The earlier digests are kept in
``SHARD_PINS``: the same pipelines with ``shuffle_block_size="shard"`` must still give them, which
proves the change is the new default shuffle and nothing else. Likewise ``ensure_mixture``'s default
rule became ``release="balanced"``: the text pipeline's earlier digests are kept in
``MOST_BEHIND_PINS``, which ``release="most_behind"`` must still give.
"""

from __future__ import annotations

import functools
import hashlib

import pytest

from zephon_core import Dataset, MixtureSpec, Pipeline, StaticMixtureWorkSource
from zephon_core.conformance.harness import run_global
from zephon_core.demo import build, corpus, make_source


def _digest(hashes: list[str]) -> tuple[int, str]:
    return len(hashes), hashlib.sha256("".join(hashes).encode()).hexdigest()


def _kernel_builder(par: int, shuffle_block_size: str = "auto") -> Pipeline:
    if shuffle_block_size == "auto":
        return build(par, source=make_source(chunk_size=32))
    paragraphs, sentences = corpus()
    ws = StaticMixtureWorkSource(  # make_source's source, in another shuffle mode
        [Dataset.from_records("paragraphs", paragraphs, 500), Dataset.from_records("sentences", sentences, 1000)],
        mixture=MixtureSpec({"paragraphs": 0.75, "sentences": 0.25}),
        chunk_size=32,
        seed=1234,
        shuffle_block_size=shuffle_block_size,
    )
    return build(par, source=ws)


def _flat(payload: dict) -> list[dict]:
    """1 → 0..2 records, keyed on content (module level: picklable for processes)."""
    n = len(payload["text"]) % 3
    return [{"n": len(payload["text"]) + j, "doc": payload["doc"]} for j in range(n)]


def _flat_builder(par: int, shuffle_block_size: str = "auto") -> Pipeline:
    paragraphs, sentences = corpus()
    ws = StaticMixtureWorkSource(
        [Dataset.from_records("p", paragraphs[:1500], shard_size=300), Dataset.from_records("s", sentences[:900], 250)],
        mixture=MixtureSpec({"p": 2.0, "s": 1.0}),
        chunk_size=48,
        seed=99,
        exhaustion="repeat",
        shuffle_block_size=shuffle_block_size,
    )
    return Pipeline(ws).flat_map(_flat, parallelism=par).shuffle(buffer_size=40, seed=3).batch(microbatch_size=6)


PINS = {  # the defaults: shuffle_block_size="auto", ensure_mixture(release="balanced")
    "kernel_demo": (122, "bc871a547a7c927cf55d57d1060651232a1c3c6a6851ea15092a600d70606c78"),
    "kernel_demo_resumed": (122, "bc871a547a7c927cf55d57d1060651232a1c3c6a6851ea15092a600d70606c78"),
    "flat_map_repeat": (60, "7e0d463736b676687d50179339fd9ff862f02844b185f4efad0bbc7067d9e49c"),
    "text_pipeline": (6, "6591c2d053a1a47b64107fc5f3300911e80c014b74ddfd2ba7017ec1ced94a00"),
}

MOST_BEHIND_PINS = {  # the text pipeline with ensure_mixture's earlier (and 0.1's only) rule
    "text_pipeline": (6, "967a4e5760a54454701870bb6403ca47a3b1d0b2965ebfd273267acf1494ab22"),
}

SHARD_PINS = {  # zephon-core 0.1's pins: shuffle_block_size="shard" is its default order
    "kernel_demo": (117, "4589dc6bfea0b74be4f3cb74ce262c6a385851e0d291d2a58d9d16913e5b43c1"),
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


def _text_builder(par: int, shuffle_block_size: str = "auto", release: str = "auto") -> Pipeline:
    paragraphs, sentences = corpus()
    ws = StaticMixtureWorkSource(
        [Dataset.from_records("p", paragraphs, shard_size=400), Dataset.from_records("s", sentences, 700)],
        mixture=MixtureSpec({"p": 0.6, "s": 0.4}),
        chunk_size=64,
        seed=5,
        weight_by="tokens",
        shuffle_block_size=shuffle_block_size,
    )
    return (
        Pipeline(ws)
        .tokenize(tokenizer_id="gpt2", parallelism=par)
        .pack_sequences(target_length=512, parallelism=par)
        .ensure_mixture(release=release)
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


def test_shard_mode_keeps_the_pins_of_zephon_core_0_1():
    shard = functools.partial(_kernel_builder, shuffle_block_size="shard")
    assert _digest(run_global(shard, lanes=4, world_size=1, runner="inline", flush_every=2).hashes) == (
        SHARD_PINS["kernel_demo"]
    )
    flat = functools.partial(_flat_builder, shuffle_block_size="shard")
    res = run_global(flat, lanes=2, world_size=1, runner="threads", parallelism=2, flush_every=3, steps=60)
    assert _digest(res.hashes) == SHARD_PINS["flat_map_repeat"]


def test_text_pipeline_shard_mode_keeps_its_old_pin():
    pytest.importorskip("zephon_tokenize")
    pytest.importorskip("zephon_pack")
    text = functools.partial(_text_builder, shuffle_block_size="shard", release="most_behind")
    res = run_global(text, lanes=4, world_size=1, runner="threads", parallelism=2, flush_every=4, steps=6)
    assert _digest(res.hashes) == SHARD_PINS["text_pipeline"]


def test_text_pipeline_with_the_earlier_mixture_rule_keeps_its_pin():
    pytest.importorskip("zephon_tokenize")
    pytest.importorskip("zephon_pack")
    text = functools.partial(_text_builder, release="most_behind")
    res = run_global(text, lanes=4, world_size=1, runner="threads", parallelism=2, flush_every=4, steps=6)
    assert _digest(res.hashes) == MOST_BEHIND_PINS["text_pipeline"]
