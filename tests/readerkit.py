"""Helpers shared by the reader plugins' tests: write a corpus split into shards, read it back
through a reader and through a full pipeline, and compare every sample with the source.

Plugin test modules import this as ``tests.readerkit`` (they put the repository root on
``sys.path``), so the comparisons are the same for every format.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from zephon_core import Dataset, MixtureSpec, Pipeline, StaticMixtureWorkSource, hash_global_batch

Record = dict[str, Any]


def split(docs: Sequence[Record], sizes: Sequence[int]) -> list[list[Record]]:
    """Cut ``docs`` into consecutive shards of the given sizes (the last takes the rest)."""
    out, start = [], 0
    for n in sizes:
        out.append(list(docs[start : start + n]))
        start += n
    if start < len(docs):
        out.append(list(docs[start:]))
    return out


def check_reader(ds: Dataset, shards: Sequence[Sequence[Record]], seed: int = 0) -> int:
    """Read every sample of every shard (shuffled, with repeats, in batches) and compare; returns count."""
    assert [s.num_samples for s in ds.shards] == [len(s) for s in shards]
    rng = np.random.default_rng(seed)
    checked = 0
    for k, expected in enumerate(shards):
        order = rng.permutation(len(expected))
        order = np.concatenate([order, rng.integers(0, len(expected), size=max(1, len(expected) // 10))])
        for part in np.array_split(order, max(1, len(order) // 97)):
            got = ds.reader.read(k, part)
            assert len(got) == len(part)
            for i, row in zip(part.tolist(), got):
                assert row == expected[i], f"shard {k} index {i}: {row!r} != {expected[i]!r}"
                checked += 1
    return checked


def pipeline(datasets: Sequence[Dataset], *, runner: str = "threads", parallelism: int = 2, lanes: int = 2) -> Pipeline:
    """Shuffled fetch + batch(32) over a mixture of ``datasets`` (equal weights)."""
    source = StaticMixtureWorkSource(
        list(datasets), mixture=MixtureSpec({d.name: 1.0 for d in datasets}), chunk_size=64, seed=7
    )
    return (
        Pipeline(source)
        .fetch(parallelism=parallelism, runner=runner)
        .batch(microbatch_size=32)
        .options(lanes=lanes, runner="inline")
    )


def check_pipeline(
    pipe: Pipeline, lookup: Callable[[str, int, int], Record], fields: Sequence[str] = ("id", "text", "source")
) -> tuple[list[str], int]:
    """Run ``pipe`` to the end, comparing every row with ``lookup(dataset, shard, index)``.

    Returns the per-microbatch hashes and the number of rows checked.
    """
    hashes, rows = [], 0
    with pipe:
        for batch in pipe:
            hashes.append(hash_global_batch([batch]))
            for r, pointers in enumerate(pipe.explain(batch)):
                (p,) = pointers
                want = lookup(p.dataset, p.shard, p.index)
                for f in fields:
                    got = batch.data[f][r]
                    got = got.item() if isinstance(got, np.generic) else got
                    assert got == want[f], f"{p}: field {f!r}: {got!r} != {want[f]!r}"
                rows += 1
    return hashes, rows
