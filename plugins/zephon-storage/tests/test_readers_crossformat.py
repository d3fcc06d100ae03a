"""The same corpus written by each format's own library gives identical global batches.

12,000 real English documents are written as JSON Lines (plain and gzip), Parquet (pyarrow) and
Vortex (vortex's writer) with the same shard boundaries, and read through one pipeline with a
mixture of two datasets on two lanes. Every format must yield the same global batch hashes.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from zephon_storage.testing.readers import split

from zephon_core import Dataset, MixtureSpec, Pipeline, StaticMixtureWorkSource
from zephon_core.conformance.harness import run_global
from zephon_core.testing.corpus import documents

pytestmark = pytest.mark.timeout(180)
SIZES = [3000, 3000]


def _write(fmt: str, folder: Path, shards: list[list[dict]]) -> None:
    folder.mkdir(parents=True)
    for k, recs in enumerate(shards):
        if fmt == "jsonl":
            data = "".join(json.dumps(r) + "\n" for r in recs).encode()
            name = f"part-{k}.jsonl" + (".gz" if k == 1 else "")
            (folder / name).write_bytes(gzip.compress(data) if k == 1 else data)
        elif fmt == "parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            pq.write_table(pa.Table.from_pylist(recs), folder / f"part-{k}.parquet", row_group_size=700)
        else:
            import pyarrow as pa
            import vortex as vx

            vx.io.write(vx.array(pa.Table.from_pylist(recs)), str(folder / f"part-{k}.vortex"))


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    docs = documents()[:12_000]
    plays, rest = docs[:6000], docs[6000:]
    root = tmp_path_factory.mktemp("crossformat")
    out = {}
    for fmt, module in (("jsonl", "zephon_jsonl"), ("parquet", "zephon_parquet"), ("vortex", "zephon_vortex")):
        pytest.importorskip(module)
        a, b = root / fmt / "a", root / fmt / "b"
        _write(fmt, a, split(plays, SIZES))
        _write(fmt, b, split(rest, SIZES))
        out[fmt] = (a, b)
    return out


def test_identical_global_batches_across_formats(written, monkeypatch, tmp_path):
    monkeypatch.setenv("ZEPHON_CACHE_DIR", str(tmp_path / "cache"))
    hashes = {}
    for fmt, (a, b) in written.items():
        da, db = Dataset.from_path("plays_a", str(a)), Dataset.from_path("plays_b", str(b))
        assert (da.format, db.format) == (fmt, fmt)

        def build(parallelism: int, da: Dataset = da, db: Dataset = db) -> Pipeline:
            ws = StaticMixtureWorkSource(
                [da, db], mixture=MixtureSpec({"plays_a": 0.7, "plays_b": 0.3}), chunk_size=128, seed=5
            )
            return Pipeline(ws).fetch(parallelism=parallelism, runner="threads").batch(microbatch_size=32)

        result = run_global(build, lanes=4, world_size=2, runner="threads", parallelism=2)
        assert len(result.hashes) > 50
        hashes[fmt] = result.hashes
    assert hashes["parquet"] == hashes["jsonl"]
    assert hashes["vortex"] == hashes["jsonl"]
