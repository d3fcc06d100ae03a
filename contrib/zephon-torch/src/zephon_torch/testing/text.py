"""A reference text pipeline for loader tests: real Shakespeare text, GPT-2 tokens, packed rows, 4 lanes.

Shared by the test process (the kernel's single-process harness, as the reference) and by the
rank processes :func:`~zephon_torch.testing.ranks.launch` starts, so both build exactly the same
pipeline. Needs ``zephon-tokenize``, ``zephon-pack`` and ``zephon-core[testing]`` (the shared
corpus), which ``zephon-torch[test]`` installs. 600 documents give lanes of different
lengths (47, 54, 58 and 43 microbatches), so with 2 or 4 ranks one rank's lanes run dry while
another rank still has data: the case where ranks must agree to stop.
"""

from __future__ import annotations

from zephon_core import Dataset, Pipeline, StaticMixtureWorkSource

LANES = 4
MICROBATCH = 2
TARGET_LENGTH = 64
DOCS = 600
FLUSH_EVERY = 2


def build(parallelism: int = 1, docs: int = DOCS) -> Pipeline:
    """The text pipeline (without rank options: the loader or the harness sets those).

    Args:
        parallelism: workers of ``tokenize`` and ``pack_sequences``.
        docs: how many documents of the shared corpus to read.
    """
    from zephon_core.testing.corpus import documents

    texts = [{"text": d["text"]} for d in documents(limit=docs)]
    ws = StaticMixtureWorkSource([Dataset.from_records("shakespeare", texts, shard_size=250)], chunk_size=32, seed=3)
    return (
        Pipeline(ws)
        .tokenize(tokenizer_id="gpt2", parallelism=parallelism)
        .pack_sequences(target_length=TARGET_LENGTH, parallelism=parallelism)
        .batch(microbatch_size=MICROBATCH)
        .options(lanes=LANES, flush_every_k_chunks=FLUSH_EVERY, runner="threads")
    )
