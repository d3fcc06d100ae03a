"""zephon-parquet against real files written by pyarrow with several row groups per file."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from zephon_storage.testing.readers import check_fetch_runners, check_reader, split

from zephon_core import Dataset
from zephon_core.testing.corpus import documents

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def docs() -> list[dict]:
    return documents()[:12_000]


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory, docs):
    """12,000 documents in three files with row groups of 1000, 700 and 2500 rows (zstd, snappy, none)."""
    root = tmp_path_factory.mktemp("parquet")
    shards = split(docs, [5000, 4000])
    (root / "nested").mkdir()
    pq.write_table(pa.Table.from_pylist(shards[0]), root / "part-0.parquet", row_group_size=1000, compression="zstd")
    pq.write_table(pa.Table.from_pylist(shards[1]), root / "part-1.parquet", row_group_size=700)
    pq.write_table(
        pa.Table.from_pylist(shards[2]), root / "nested" / "part-2.parquet", row_group_size=2500, compression="none"
    )
    (root / "_SUCCESS").write_text("")
    return root, shards


@pytest.fixture(autouse=True)
def cache_env(tmp_path, monkeypatch):
    monkeypatch.setenv("ZEPHON_CACHE_DIR", str(tmp_path / "zephon-cache"))


def test_detects_and_reads_every_sample(corpus_dir):
    root, shards = corpus_dir
    ds = Dataset.from_path("docs", str(root))
    assert ds.format == "parquet"
    assert [s.id for s in ds.shards] == ["nested/part-2.parquet", "part-0.parquet", "part-1.parquet"]
    ordered = [shards[2], shards[0], shards[1]]
    assert check_reader(ds, ordered) > 12_000
    assert len(ds.reader.row_group_offsets(2)) - 1 == 6  # 4000 rows in groups of 700


def test_each_row_group_is_decoded_once(corpus_dir):
    root, shards = corpus_dir
    ds = Dataset.from_path("docs", str(root / "part-0.parquet"))
    reader = ds.reader
    rng = np.random.default_rng(1)
    for _ in range(20):
        idx = rng.integers(0, 5000, size=64)
        assert reader.read(0, idx) == [shards[0][i] for i in idx.tolist()]
    assert reader._cache.misses <= 5  # five row groups, each decoded once
    tiny = Dataset.from_path("docs", str(root / "part-0.parquet"), row_group_cache_bytes=1).reader
    assert tiny.read(0, np.array([0, 4999])) == [shards[0][0], shards[0][4999]]
    assert len(tiny._cache) == 0  # a budget smaller than one row group keeps nothing


def test_columns_option(corpus_dir):
    root, shards = corpus_dir
    ds = Dataset.from_path("docs", str(root), columns=["text"])
    assert ds.reader.read(1, np.array([3, 1])) == [{"text": shards[0][3]["text"]}, {"text": shards[0][1]["text"]}]


@pytest.mark.slow
def test_pipeline_threads_and_processes(corpus_dir):
    root, shards = corpus_dir
    a = Dataset.from_path("a", str(root / "part-0.parquet"))
    b = Dataset.from_path("b", str(root))
    assert check_fetch_runners([(a, [shards[0]]), (b, [shards[2], shards[0], shards[1]])]) >= 9900  # same batches from threads and processes


def test_cli_index(corpus_dir, capsys):
    from zephon_core.cli import main

    root, _ = corpus_dir
    assert main(["index", str(root)]) == 0
    out = capsys.readouterr().out
    assert "parquet: 3 files, 12000 rows, 13 row groups" in out and "_zephon_manifest.json" in out


def test_s3_dataset_with_prefetch(corpus_dir, tmp_path):
    pytest.importorskip("moto.server")
    from zephon_testkit.s3 import moto_s3

    root, shards = corpus_dir
    with moto_s3("parquet-tests") as s3:
        s3.upload_dir(str(root), "corpus")
        ds = Dataset.from_path("s3", s3.url("corpus"), format="parquet", storage_options=s3.storage_options, prefetch=2)
        assert check_reader(ds, [shards[2], shards[0], shards[1]]) > 12_000
        cached = list((tmp_path / "zephon-cache" / "shards").glob("*.parquet"))
        assert len(cached) == 3
