"""The pipelines whose checkpoints zephon-core 0.1.0 wrote into this folder: user code, frozen.

This module plays the part of a user's training script. ``make_checkpoints.py`` ran it once with
release 0.1.0 to write the checkpoints; ``tests/test_checkpoint_compat.py`` runs the very same code
with today's kernel and resumes from them. So it must never change: a user upgrading mid-run does
not rewrite the script that built the pipeline either. Its module path is part of the data, too:
the fingerprint of the ``flat_map`` case names :func:`split_counts` as
``tests.data.checkpoints_0_1_0.builders:split_counts``, so moving or renaming this file makes that
checkpoint unloadable exactly as moving a kernel function would.

Every pipeline is built with :func:`plugin_manager`: the kernel's built-ins plus, for the text
case, the tokenize and pack plugins, registered by module rather than scanned from the installed
entry points, so what else happens to be installed can neither break nor change these pipelines.

Corpora are made here, deterministically and in memory (no files: a checkpoint must not hold a
machine's paths), from :meth:`random.Random.random`, whose sequence for an int seed Python
guarantees across versions. The demo case does not use :func:`zephon_core.demo.corpus` because that
text is the standard library's documentation, which changes with every Python release.

Three cases:

* ``kernel_demo``: :func:`zephon_core.demo.build` (map, an n-to-m ``stateful_transform``, shuffle,
  batch) over a two-dataset mixture with an explicit ``chunk_size`` and ``flush_every_k_chunks=2``;
* ``text_default_sizing``: the GPT-2 tokenizer shipped with zephon-tokenize, ``pack_sequences`` and
  ``batch``, with the default ``chunk_size`` (sized in tokens from the calibrated estimates) and the
  default ``flush_every_k_chunks``: a later change of those defaults must not change how this
  checkpoint resumes;
* ``flat_map_repeat``: ``flat_map`` (1 to 0..2 records) and ``shuffle`` over ``exhaustion="repeat"``
  datasets, with the default (record-count) ``chunk_size`` and default ``flush_every_k_chunks``.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from zephon_core import Dataset, MixtureSpec, Pipeline, StaticMixtureWorkSource
from zephon_core.demo import build as demo_build
from zephon_core.plugins import ZephonPluginManager

WORDS = (
    "the of and to in is was for on that with as by at from it an be this which or are were his had not but "
    "their have one all they has been its more also when after first new other time who two into most some "
    "over only can many would there may such than these about city during where between world river under "
    "through water years while part could known north south later against since system early being three "
    "small large state group house before around music family people history record station light number "
    "market village garden winter summer island bridge forest engine letter season harbour mountain valley "
    "theory signal library machine language kitchen journey council quarter factory railway cathedral"
).split()
"""The vocabulary of every generated text (common English words, so GPT-2 tokenizes them as a real corpus)."""


@functools.lru_cache(maxsize=1)
def sentences() -> tuple[str, ...]:
    """512 sentences of 4..16 words of :data:`WORDS`: the phrases every generated text is made of."""
    rng = random.Random(0)
    out = []
    for _ in range(512):
        n = 4 + int(rng.random() * 13)
        out.append(" ".join(WORDS[int(rng.random() * len(WORDS))] for _ in range(n)).capitalize() + ".")
    return tuple(out)


@functools.cache
def prose(seed: int, count: int, min_words: int, max_words: int) -> tuple[str, ...]:
    """``count`` texts of about ``min_words``..``max_words`` words (whole sentences), a pure function of the arguments.

    Only :meth:`random.Random.random` is used: Python guarantees its sequence for an int seed across
    versions (``randint``/``choice`` carry no such promise). Texts are cached as strings; every
    builder makes fresh record dicts from them, so no run can change another's input.
    """
    rng = random.Random(seed)
    pool = sentences()
    texts = []
    for _ in range(count):
        want = min_words + int(rng.random() * (max_words - min_words + 1))
        parts: list[str] = []
        words = 0
        while words < want:
            s = pool[int(rng.random() * len(pool))]
            parts.append(s)
            words += s.count(" ") + 1
        texts.append(" ".join(parts))
    return tuple(texts)


def plugin_manager(*modules: str) -> ZephonPluginManager:
    """The kernel's built-ins plus the plugin modules named (e.g. ``"zephon_tokenize.plugin"``), nothing scanned."""
    import importlib

    return ZephonPluginManager(load_entrypoints=False, plugins=[importlib.import_module(m) for m in modules])


def text_records(texts: tuple[str, ...]) -> list[dict[str, Any]]:
    """``{"text", "doc"}`` records of ``texts`` (the shape of :func:`zephon_core.demo.corpus`)."""
    return [{"text": t, "doc": i} for i, t in enumerate(texts)]


# -- kernel_demo ----------------------------------------------------------------------------------
def demo_source() -> StaticMixtureWorkSource:
    """The demo's mixture (paragraphs and sentences, 3:1) over generated text, in chunks of 32.

    Some sentences are shorter than 48 characters, so the demo's ``to_bytes`` drops them (a filter).
    """
    paragraphs = Dataset.from_records("paragraphs", text_records(prose(101, 1300, 6, 70)), shard_size=100)
    sentences = Dataset.from_records("sentences", text_records(prose(202, 2100, 3, 18)), shard_size=150)
    return StaticMixtureWorkSource(
        [paragraphs, sentences],
        mixture=MixtureSpec({"paragraphs": 0.75, "sentences": 0.25}),
        chunk_size=32,
        seed=1234,
    )


def build_kernel_demo(parallelism: int) -> Pipeline:
    """:func:`zephon_core.demo.build` on :func:`demo_source` (microbatches of 8 rows of 128 bytes)."""
    return demo_build(parallelism, source=demo_source(), plugins=plugin_manager())


# -- text_default_sizing --------------------------------------------------------------------------
def text_source() -> StaticMixtureWorkSource:
    """Two generated text datasets mixed 7:3 by samples; ``chunk_size`` and window left to the defaults."""
    articles = Dataset.from_records("articles", text_records(prose(303, 6300, 120, 520)), shard_size=400)
    notes = Dataset.from_records("notes", text_records(prose(404, 2700, 20, 120)), shard_size=300)
    return StaticMixtureWorkSource([articles, notes], mixture=MixtureSpec({"articles": 0.7, "notes": 0.3}), seed=5)


def build_text(parallelism: int) -> Pipeline:
    """Tokenize with the shipped GPT-2 tokenizer, pack into rows of 1024 tokens, microbatches of 8."""
    return (
        Pipeline(text_source(), plugins=plugin_manager("zephon_tokenize.plugin", "zephon_pack.plugin"))
        .tokenize(tokenizer_id="gpt2", parallelism=parallelism)
        .pack_sequences(target_length=1024, parallelism=parallelism)
        .batch(microbatch_size=8)
    )


# -- flat_map_repeat ------------------------------------------------------------------------------
def split_counts(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """One record becomes ``x % 3`` records (0, 1 or 2), keyed on content: an n-to-m step."""
    x = int(payload["x"])
    return [{"x": x * 10 + j, "src": payload["src"]} for j in range(x % 3)]


def repeat_source() -> StaticMixtureWorkSource:
    """A small and a large numeric dataset mixed 1:2; both repeat, the small one many times."""
    small = Dataset.from_records("small", [{"x": i, "src": 0} for i in range(700)], shard_size=128)
    large = Dataset.from_records("large", [{"x": 100_000 + i, "src": 1} for i in range(2500)], shard_size=500)
    return StaticMixtureWorkSource(
        [small, large], mixture=MixtureSpec({"small": 1.0, "large": 2.0}), seed=21, exhaustion="repeat"
    )


def build_flat_map_repeat(parallelism: int) -> Pipeline:
    """``flat_map(split_counts)``, a reservoir shuffle and microbatches of 32 rows."""
    return (
        Pipeline(repeat_source(), plugins=plugin_manager())
        .flat_map(split_counts, parallelism=parallelism)
        .shuffle(buffer_size=48, seed=3)
        .batch(microbatch_size=32)
    )


# -- the cases --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    """One stored checkpoint: how its pipeline is built and run, and where the run was cut.

    Attributes:
        name: the file stem (``<name>.json`` is the merged checkpoint).
        build: ``build(parallelism) -> Pipeline`` without rank options (as the conformance harness takes).
        lanes: the ``lanes`` option.
        flush_every: the ``flush_every_k_chunks`` option; None leaves the pipeline's default, as a
            user who never sets it does.
        cut: global steps delivered before the checkpoint was taken (on 2 ranks).
        steps: global steps of the whole run; None runs until the data ends (the repeating case
            never ends, so it is bounded).
        plugins: distributions the builder needs besides the kernel.
    """

    name: str
    build: Callable[[int], Pipeline]
    lanes: int
    flush_every: int | None
    cut: int
    steps: int | None
    plugins: tuple[str, ...] = ()


CASES = (
    Case("kernel_demo", build_kernel_demo, lanes=4, flush_every=2, cut=29, steps=None),
    Case(
        "text_default_sizing",
        build_text,
        lanes=4,
        flush_every=None,
        cut=9,
        steps=None,
        plugins=("zephon_tokenize", "zephon_pack"),
    ),
    Case("flat_map_repeat", build_flat_map_repeat, lanes=4, flush_every=None, cut=75, steps=95),
)
"""Every stored checkpoint, by the order ``make_checkpoints.py`` writes them."""
