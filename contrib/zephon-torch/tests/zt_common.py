"""The pipeline every torch test runs: real Shakespeare text, GPT-2 tokens, packed rows, 4 lanes.

Shared by the test process (the kernel's single-process harness, as the reference) and by the
rank processes, so both build exactly the same pipeline. 600 documents give lanes of different
lengths (47, 54, 58 and 43 microbatches), so with 2 or 4 ranks one rank's lanes run dry while
another rank still has data: the case where ranks must agree to stop.
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from typing import Any

from zephon_core import Dataset, Pipeline, StaticMixtureWorkSource

REPO = Path(__file__).resolve().parents[3]
LANES = 4
MICROBATCH = 2
TARGET_LENGTH = 64
DOCS = 600
FLUSH_EVERY = 2


@functools.lru_cache(maxsize=1)
def corpus() -> Any:
    """The repository's shared offline corpus module (``tests/corpus.py``), loaded by path."""
    path = REPO / "tests" / "corpus.py"
    spec = importlib.util.spec_from_file_location("zephon_shared_corpus_for_torch_tests", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build(parallelism: int = 1, docs: int = DOCS) -> Pipeline:
    """The text pipeline (without rank options: the loader or the harness sets those)."""
    texts = [{"text": d["text"]} for d in corpus().documents(limit=docs)]
    ws = StaticMixtureWorkSource([Dataset.from_records("shakespeare", texts, shard_size=250)], chunk_size=32, seed=3)
    return (
        Pipeline(ws)
        .tokenize(tokenizer_id="gpt2", parallelism=parallelism)
        .pack_sequences(target_length=TARGET_LENGTH, parallelism=parallelism)
        .batch(microbatch_size=MICROBATCH)
        .options(lanes=LANES, flush_every_k_chunks=FLUSH_EVERY, runner="threads")
    )
