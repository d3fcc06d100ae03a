"""A small pipeline whose microbatches mix numeric and string fields, for adapter and trainer tests.

Each record becomes a causal-LM row (``input_ids`` and ``labels``, int64, fixed length) plus a
document ``id`` and a caption-like ``text`` of varying length: the shape of a real batch, where
ids, captions and source names travel next to the tokens. Needs only the kernel and numpy, so
the trainer packages' tests (and their install-alone checks) can use it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from zephon_core import Dataset, Pipeline, StaticMixtureWorkSource

LANES = 4
MICROBATCH = 2
SEQ_LEN = 16
VOCAB = 64
DOCS = 240


def make_row(record: dict[str, Any]) -> dict[str, Any]:
    """One training row from a record ``{"i": n}``: tokens drawn from the record's own seed, an id, a text."""
    i = int(record["i"])
    tokens = np.random.default_rng(i).integers(0, VOCAB, SEQ_LEN, dtype=np.int64)
    return {"input_ids": tokens, "labels": tokens.copy(), "id": f"doc-{i:05d}", "text": "word " * (i % 7) + f"#{i}"}


def build(docs: int = DOCS, parallelism: int = 1, runner: str = "threads") -> Pipeline:
    """The records pipeline (no rank options: the adapter or the harness sets those).

    Args:
        docs: number of records.
        parallelism: workers of the row-making ``map_transform``.
        runner: where those workers run (``"processes"`` sends the string fields across processes).
    """
    ws = StaticMixtureWorkSource([Dataset.from_records("docs", [{"i": i} for i in range(docs)])], chunk_size=16, seed=5)
    return (
        Pipeline(ws)
        .map_transform(make_row, parallelism=parallelism, runner=runner)
        .batch(microbatch_size=MICROBATCH)
        .options(lanes=LANES)
    )
