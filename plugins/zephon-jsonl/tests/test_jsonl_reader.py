"""zephon-jsonl against real files: plain, gzip and zstd JSON Lines built from the shared corpus."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import numpy as np
import pytest
import zstandard
from zephon_storage.testing.readers import check_fetch_runners, check_reader, split

from zephon_core import Dataset, ReaderError
from zephon_core.testing.corpus import documents

pytestmark = pytest.mark.timeout(120)


def write_jsonl(path: Path, records: list[dict], compression: str = "none") -> None:
    data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode()
    if compression == "gzip":
        data = gzip.compress(data)
    elif compression == "zstd":
        data = zstandard.ZstdCompressor(level=3).compress(data)
    path.write_bytes(data)


@pytest.fixture(scope="module")
def docs() -> list[dict]:
    return documents()[:12_000]


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory, docs):
    """12,000 documents in four shards: plain, gzip, zstd and a plain file in a subfolder."""
    root = tmp_path_factory.mktemp("jsonl")
    shards = split(docs, [4000, 3000, 3000])
    (root / "sub").mkdir()
    write_jsonl(root / "a.jsonl", shards[0])
    write_jsonl(root / "b.jsonl.gz", shards[1], "gzip")
    write_jsonl(root / "c.jsonl.zst", shards[2], "zstd")
    write_jsonl(root / "sub" / "d.ndjson", shards[3])
    (root / "README.txt").write_text("not data")
    return root, shards


@pytest.fixture(autouse=True)
def cache_env(tmp_path, monkeypatch):
    monkeypatch.setenv("ZEPHON_CACHE_DIR", str(tmp_path / "zephon-cache"))


def test_detects_and_reads_every_sample(corpus_dir):
    root, shards = corpus_dir
    ds = Dataset.from_path("docs", str(root))
    assert ds.format == "jsonl"
    assert [s.id for s in ds.shards] == ["a.jsonl", "b.jsonl.gz", "c.jsonl.zst", "sub/d.ndjson"]
    assert check_reader(ds, shards) > 12_000
    assert (root / "a.jsonl.zidx").exists() and (root / "b.jsonl.gz.zidx").exists()


def test_index_is_reused_and_survives_an_mtime_only_change(corpus_dir):
    root, shards = corpus_dir
    Dataset.from_path("docs", str(root))
    os.utime(root / "a.jsonl", (1, 1))  # e.g. copied without -t: content unchanged
    ds = Dataset.from_path("docs", str(root), format="jsonl")
    assert ds.reader.built_indexes == 0
    assert ds.reader.read(0, np.array([3999, 0]))[0] == shards[0][3999]


@pytest.mark.slow
def test_pipeline_threads_and_processes(corpus_dir):
    root, shards = corpus_dir
    a = Dataset.from_path("a", str(root / "a.jsonl"))
    b = Dataset.from_path("b", str(root), fields=["id", "text", "source"])
    assert check_fetch_runners([(a, [shards[0]]), (b, shards)]) >= 7900  # same batches from threads and processes


def test_cli_index_and_build_index(corpus_dir, capsys):
    from zephon_core.cli import main

    root, _ = corpus_dir
    assert main(["index", str(root)]) == 0
    out = capsys.readouterr().out
    assert "jsonl: 4 files, 12000 records" in out


def test_memory_dataset_keeps_its_index_in_the_cache(tmp_path, docs):
    import fsspec

    fs = fsspec.filesystem("memory")
    data = "".join(json.dumps(r) + "\n" for r in docs[:500]).encode()
    fs.pipe("/jsonl-mem/part.jsonl", data)
    fs.pipe("/jsonl-mem/part2.jsonl.gz", gzip.compress(data))
    ds = Dataset.from_path("mem", "memory://jsonl-mem")
    assert check_reader(ds, [docs[:500], docs[:500]]) >= 1000
    index_dir = tmp_path / "zephon-cache" / "index"
    assert len(list(index_dir.glob("*.zidx"))) == 2
    assert not fs.exists("/jsonl-mem/part.jsonl.zidx")


def test_s3_dataset_and_uploaded_index(tmp_path, corpus_dir):
    pytest.importorskip("moto.server")
    from zephon_testkit.s3 import moto_s3

    root, shards = corpus_dir
    Dataset.from_path("local", str(root))  # builds the .zidx files that are uploaded with the data
    with moto_s3("jsonl-tests") as s3:
        s3.upload_dir(str(root), "corpus")
        ds = Dataset.from_path("s3", s3.url("corpus"), storage_options=s3.storage_options, prefetch=1, format="jsonl")
        assert ds.reader.built_indexes == 0  # the .zidx files uploaded beside the data were used
        assert check_reader(ds, shards) > 12_000
        s3.client.delete_object(Bucket=s3.bucket, Key="corpus/sub/d.ndjson")
        opts = {"storage_options": s3.storage_options, "format": "jsonl", "cache_dir": str(tmp_path / "other")}
        with pytest.raises(ReaderError, match=r"s3://jsonl-tests/corpus/sub/d\.ndjson: missing, but its index"):
            Dataset.from_path("s3b", s3.url("corpus"), **opts)
        s3.client.delete_object(Bucket=s3.bucket, Key="corpus/sub/d.ndjson.zidx")
        s3.client.delete_object(Bucket=s3.bucket, Key="corpus/_zephon_manifest.json")  # if `zephon index` ran
        fresh = Dataset.from_path("s3b", s3.url("corpus"), **opts)
        assert fresh.num_samples == 10_000
        s3.client.delete_object(Bucket=s3.bucket, Key="corpus/a.jsonl")
        with pytest.raises(ReaderError, match=r"s3://jsonl-tests/corpus/a\.jsonl: not found"):
            fresh.reader.read(0, np.array([1]))


def test_repeats_are_independent_dicts(corpus_dir):
    root, _ = corpus_dir
    ds = Dataset.from_path("docs", str(root))
    a, b = ds.reader.read(0, np.array([7, 7]))
    a["text"] = "changed"
    assert b["text"] != "changed"
