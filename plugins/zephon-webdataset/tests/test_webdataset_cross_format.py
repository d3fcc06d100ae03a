"""The same records as WebDataset tars and as Parquet files: identical global batch hashes.

A reader's output is only its samples, so images (bytes) with captions and labels stored either
way, in the same shards and order, must give the same training batches through the same pipeline.
The tars are written by ``webdataset.TarWriter``, the Parquet files by pyarrow and read by
zephon-parquet; the pipeline runs as two data-parallel ranks in the conformance harness, which
hashes every global step.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from zephon_webdataset.testing import write_tar

from zephon_core import Dataset, MixtureSpec, Pipeline, StaticMixtureWorkSource
from zephon_core.conformance.harness import run_global

pytestmark = pytest.mark.timeout(180)


def records(n: int, seed: int = 5) -> list[dict[str, Any]]:
    """``n`` image-like records: random bytes of varying length, a caption and a class."""
    rng = np.random.default_rng(seed)
    return [
        {
            "__key__": f"img/{i:05d}",
            "jpg": rng.integers(0, 256, int(rng.integers(200, 3000)), dtype=np.uint8).tobytes(),
            "txt": f"a photo of thing {i} ({'red' if i % 3 else 'blue'})",
            "cls": i % 7,
        }
        for i in range(n)
    ]


class Fields:
    """The same transform for both formats (picklable)."""

    def __call__(self, row: dict[str, Any]) -> dict[str, Any]:
        return {"key": row["__key__"], "jpg": row["jpg"], "txt": row["txt"], "cls": row["cls"]}


def collate(rows: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """Images as a zero-padded uint8 matrix plus lengths (exact bytes, fixed dtype), the rest as arrays."""
    longest = max(len(r["jpg"]) for r in rows)
    images = np.zeros((len(rows), longest), dtype=np.uint8)
    for k, r in enumerate(rows):
        images[k, : len(r["jpg"])] = np.frombuffer(r["jpg"], dtype=np.uint8)
    return {
        "key": np.asarray([r["key"] for r in rows]),
        "jpg": images,
        "jpg_len": np.asarray([len(r["jpg"]) for r in rows], dtype=np.int64),
        "txt": np.asarray([r["txt"] for r in rows]),
        "cls": np.asarray([r["cls"] for r in rows], dtype=np.int64),
    }


def global_hashes(ds: Dataset) -> list[str]:
    def build(parallelism: int) -> Pipeline:
        source = StaticMixtureWorkSource([ds], mixture=MixtureSpec({ds.name: 1.0}), chunk_size=16, seed=3)
        return (
            Pipeline(source)
            .fetch(parallelism=parallelism)
            .map_transform(Fields())
            .batch(microbatch_size=8, collate=collate)
        )

    return run_global(build, lanes=4, world_size=2, parallelism=2).hashes


def parquet(folder: Path, shards: list[list[dict[str, Any]]]) -> Dataset:
    pytest.importorskip("zephon_parquet")
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir()
    for k, rows in enumerate(shards):
        pq.write_table(pa.Table.from_pylist(rows), folder / f"part-{k}.parquet", row_group_size=40)
    return Dataset.from_path("imgs", str(folder), format="parquet")


def webdataset(folder: Path, shards: list[list[dict[str, Any]]]) -> Dataset:
    for k, rows in enumerate(shards):
        write_tar(folder / f"part-{k}.tar", rows)
    return Dataset.from_path("imgs", str(folder), format="webdataset")


def test_webdataset_and_parquet_give_identical_global_batches(tmp_path: Path) -> None:
    recs = records(300)
    shards = [recs[:120], recs[120:200], recs[200:]]
    hashes = global_hashes(webdataset(tmp_path / "wds", shards))
    assert len(hashes) >= 8  # 300 samples, 32 per global step (4 lanes x 8)
    assert hashes == global_hashes(parquet(tmp_path / "pq", shards))
    # One image byte differs in every record of shard 1: the hashes must see it.
    changed = [{**r, "jpg": r["jpg"][:-1] + bytes([r["jpg"][-1] ^ 1])} for r in shards[1]]
    other = global_hashes(parquet(tmp_path / "pq2", [shards[0], changed, shards[2]]))
    assert other != hashes and len(other) == len(hashes)
