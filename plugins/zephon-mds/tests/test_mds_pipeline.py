"""MDS datasets through full Zephon pipelines: shuffled fetch, batch(…), runners, mixtures."""

from __future__ import annotations

from typing import Any

import numpy as np
from zephon_storage.testing.readers import run_explained

from zephon_core import Dataset, MixtureSpec, Pipeline, StaticMixtureWorkSource, hash_global_batch


class _Fields:
    """Fixed-shape columns only (``tokens`` varies in length); picklable for process runners."""

    def __call__(self, row: dict[str, Any]) -> dict[str, Any]:
        return {k: row[k] for k in ("id", "text", "image", "i16", "f32", "pil")}


def _run(ds: Dataset, *, runner: str = "threads", lanes: int = 2) -> tuple[list[str], list]:
    ws = StaticMixtureWorkSource([ds], chunk_size=16, seed=5)
    pipe = Pipeline(ws).fetch(parallelism=2, runner=runner).map_transform(_Fields()).batch(8).options(lanes=lanes)
    return run_explained(pipe)


def test_pipeline_delivers_every_sample_once(data_dir, expected, tagger):
    ds = Dataset.from_path("mds", str(data_dir / "plain"))
    exp = expected("plain")["samples"]
    starts = np.concatenate([[0], np.cumsum(ds.sizes)])
    _, rows = _run(ds)
    ids = [int(row["id"]) for _, row in rows]
    assert len(ids) == len(set(ids)) and len(ids) >= ds.num_samples - 2 * 8
    for pointer, row in rows:
        want = exp[int(starts[pointer.shard]) + pointer.index]
        assert int(row["id"]) == want["id"] and str(row["text"]) == want["text"]
        assert tagger(row["image"]) == want["image"] and tagger(row["pil"]) == want["pil"]
        assert tagger(row["i16"]) == want["i16"] and tagger(row["f32"]) == want["f32"]


def test_plain_and_zstd_give_identical_batches(data_dir):
    plain, _ = _run(Dataset.from_path("d", str(data_dir / "plain")))
    zstd, _ = _run(Dataset.from_path("d", str(data_dir / "zstd")))
    assert len(plain) >= 10 and plain == zstd


def test_process_runner_reads_the_same(data_dir):
    ds = Dataset.from_path("z", str(data_dir / "zstd"))
    threads, _ = _run(ds, runner="threads")
    processes, _ = _run(ds, runner="processes")
    assert threads == processes


def test_mixture_with_gzip_dataset_is_deterministic(data_dir):
    a = Dataset.from_path("a", str(data_dir / "plain"))
    b = Dataset.from_path("b", str(data_dir / "gz"))

    def run(lanes: int) -> list[str]:
        ws = StaticMixtureWorkSource([a, b], mixture=MixtureSpec({"a": 2.0, "b": 1.0}), chunk_size=16)
        pipe = Pipeline(ws).fetch(parallelism=2).map_transform(_Fields()).batch(6).options(lanes=lanes)
        with pipe:
            return [hash_global_batch([x]) for x in pipe]

    first = run(2)
    assert len(first) >= 8 and run(2) == first
