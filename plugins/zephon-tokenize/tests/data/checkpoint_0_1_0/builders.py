"""The mixed text pipeline whose checkpoint zephon-tokenize 0.1.0 wrote into this folder: user code, frozen.

This module plays the part of a user's training script, run once with release 0.1.0 (zephon-core,
zephon-tokenize and zephon-pack 0.1.0) by ``make_checkpoint.py`` and today by
``tests/test_mixture_checkpoint_0_1_0.py``. It must never change: a user upgrading mid-run does not
rewrite the script that built the pipeline either. It leaves ``ensure_mixture`` at its defaults,
which in 0.1.0 meant the only release rule there was (``"most_behind"``); today's default is
``release="balanced"``, and the checkpoint must still resume with 0.1.0's batches.

The pipeline: two in-memory datasets of generated prose (short and long documents) mixed 60:40 in
tokens, GPT-2 ``tokenize`` (the bundled files), ``pack_sequences(256)``, ``ensure_mixture()``,
``batch(2)``, 4 lanes, a window every 3 chunks.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

from zephon_core import Dataset, MixtureSpec, Pipeline, StaticMixtureWorkSource, hash_global_batch, merge_checkpoints
from zephon_core.plugins import ZephonPluginManager

LANES = 4
FLUSH_EVERY = 3
STEPS = 24
"""Global steps of the uninterrupted run."""
CUT = 7
"""Global steps before the checkpoint (taken on 2 ranks)."""

WORDS = (
    "the of and to in is was for on that with as by it from at his an be this which or are had not "
    "but were all they one their has have been more its we when who will would there so if no can "
    "river mountain letter window garden winter music number station question morning country "
    "language history evening kingdom harbour machine engine silver thunder lantern orchard"
).split()


def prose(seed: int, count: int, min_words: int, max_words: int) -> list[dict[str, Any]]:
    """``count`` documents of random words (a fixed generator: the same text on every machine)."""
    rng = random.Random(seed)
    docs = []
    for i in range(count):
        n = rng.randint(min_words, max_words)
        docs.append({"text": " ".join(rng.choice(WORDS) for _ in range(n)) + ".", "doc": i})
    return docs


def build() -> Pipeline:
    """The pipeline, from a fresh source."""
    source = StaticMixtureWorkSource(
        [
            Dataset.from_records("short", prose(1, 3000, 4, 30), shard_size=300),
            Dataset.from_records("long", prose(2, 1200, 40, 160), shard_size=150),
        ],
        mixture=MixtureSpec({"short": 0.6, "long": 0.4}),
        weight_by="tokens",
        chunk_size=32,
        seed=21,
    )
    import zephon_pack.plugin
    import zephon_tokenize.plugin

    # these two plugins only: what else is installed cannot matter
    plugins = ZephonPluginManager(load_entrypoints=False, plugins=[zephon_tokenize.plugin, zephon_pack.plugin])
    return (
        Pipeline(source, plugins=plugins)
        .tokenize(tokenizer_id="gpt2")
        .pack_sequences(target_length=256)
        .ensure_mixture()
        .batch(microbatch_size=2)
    )


def run(world_size: int, *, steps: int, resume: dict[str, Any] | None = None) -> tuple[list[str], dict[str, Any]]:
    """Every rank of a world for ``steps`` global steps: the global batches' hashes and the merged
    checkpoint taken at the end."""
    per = LANES // world_size
    per_rank = []
    states = []
    for rank in range(world_size):
        opts = {"lanes": LANES, "dp_rank": rank, "dp_world_size": world_size, "flush_every_k_chunks": FLUSH_EVERY}
        with build().options(runner="inline", **opts) as p:
            if resume is not None:
                p.load_state_dict(resume)
            it = iter(p)
            got = list(itertools.islice(it, per * steps))
            assert len(got) == per * steps, f"rank {rank} ran out"
            states.append(p.state_dict())
        per_rank.append(got)
    hashes = [hash_global_batch([b for r in per_rank for b in r[t * per : (t + 1) * per]]) for t in range(steps)]
    return hashes, merge_checkpoints(states)
