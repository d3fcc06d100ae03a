"""LitData datasets through full Zephon pipelines: shuffled fetch, transforms, batch(…), runners."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from zephon_storage.testing.readers import run_explained

from zephon_core import Dataset, MixtureSpec, Pipeline, StaticMixtureWorkSource, hash_global_batch


def _fields(row: dict[str, Any]) -> dict[str, Any]:
    return {"id": row["id"], "text": row["text"], "image": row["image"]}


def _run(ds: Dataset, *, runner: str = "threads", lanes: int = 2, fields: Any = _fields) -> tuple[list[str], list]:
    ws = StaticMixtureWorkSource([ds], chunk_size=16, seed=11)
    pipe = Pipeline(ws).fetch(parallelism=2, runner=runner).map_transform(fields).batch(8).options(lanes=lanes)
    return run_explained(pipe)


def test_pipeline_delivers_every_sample_once(data_dir, expected, tagger):
    ds = Dataset.from_path("lit", str(data_dir / "pytree"))
    exp = expected("pytree")["samples"]
    starts = np.concatenate([[0], np.cumsum(ds.sizes)])
    _, rows = _run(ds)
    ids = [int(row["id"]) for _, row in rows]
    assert len(ids) == len(set(ids)) and len(ids) >= ds.num_samples - 2 * 8
    assert ids != sorted(ids), "the work source shuffles"
    for pointer, row in rows:
        want = exp[int(starts[pointer.shard]) + pointer.index]
        assert int(row["id"]) == want["id"] and str(row["text"]) == want["text"]
        assert tagger(row["image"]) == want["image"]


def test_compressed_layouts_give_identical_batches(data_dir):
    """Same samples, four chunk layouts: the global batches must hash the same."""
    runs = {
        v: _run(Dataset.from_path("d", str(data_dir / v)))[0]
        for v in ("pytree", "pytree_zstd_batch", "pytree_zstd_chunk", "pytree_zstd_sample")
    }
    first = runs["pytree"]
    assert len(first) >= 10
    assert all(h == first for h in runs.values())


def test_process_runner_reads_the_same(data_dir):
    """Readers are pickled into spawned fetch workers there: same batches as with threads."""
    ds = Dataset.from_path("a", str(data_dir / "arrow_rows_zstd"))
    fields = _TextFields()
    threads, _ = _run(ds, runner="threads", fields=fields)
    processes, _ = _run(ds, runner="processes", fields=fields)
    assert threads == processes and len(threads) >= 10


class _TextFields:
    """A picklable transform (process runners send it to workers)."""

    def __call__(self, row: dict[str, Any]) -> dict[str, Any]:
        return {"id": row["id"], "text": row["text"], "lang": row["meta"]["lang"]}


def test_mixture_of_two_litdata_layouts(data_dir):
    """An Arrow-row dataset and a pytree one in one mixture; reruns are deterministic."""
    arrow = Dataset.from_path("arrow", str(data_dir / "arrow_rows"))
    tree = Dataset.from_path("tree", str(data_dir / "pytree_zstd_batch"))

    def run() -> list[str]:
        ws = StaticMixtureWorkSource([arrow, tree], mixture=MixtureSpec({"arrow": 1.0, "tree": 1.0}), chunk_size=16)
        pipe = Pipeline(ws).fetch(parallelism=2).map_transform(_IdText()).batch(8).options(lanes=2)
        with pipe:
            return [hash_global_batch([b]) for b in pipe]

    first = run()
    assert len(first) >= 8 and run() == first


class _IdText:
    def __call__(self, row: dict[str, Any]) -> dict[str, Any]:
        return {"id": row["id"], "text": row["text"]}


@pytest.mark.parametrize("lanes", [1, 4])
def test_token_blocks_batch_without_a_collate(data_dir, lanes):
    """TokensLoader blocks are fixed-size arrays: batch(...) stacks them as they are."""
    ds = Dataset.from_path("tok", str(data_dir / "tokens"), block_size=8)
    ws = StaticMixtureWorkSource([ds], chunk_size=8, seed=1)
    pipe = Pipeline(ws).batch(4).options(lanes=lanes)
    with pipe:
        shapes = {b.data["item"].shape for b in pipe}
    assert shapes == {(4, 8)}
