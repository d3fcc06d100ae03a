"""Every LitData fixture read natively, sample by sample, against what LitData wrote and read back."""

from __future__ import annotations

import json
import pickle
import shutil
import sys

import fsspec
import numpy as np
import pytest
import zstandard
from zephon_storage.testing.readers import read_all

from zephon_core import ConfigError, Dataset, ReaderError
from zephon_core.plugins import get_plugin_manager

READABLE = (
    "arrow_rows",
    "arrow_rows_zstd",
    "pytree",
    "pytree_zstd_batch",
    "pytree_zstd_chunk",
    "pytree_zstd_sample",
    "tensors_tuple",
    "tokens",
)


def _options(exp: dict) -> dict:
    return {"block_size": exp["block_size"]} if exp.get("block_size") else {}


@pytest.mark.parametrize("variant", READABLE)
def test_every_sample_matches_what_litdata_wrote(variant, data_dir, expected, tagger):
    exp = expected(variant)
    ds = Dataset.from_path(variant, str(data_dir / variant), **_options(exp))
    assert ds.format == "litdata"
    assert ds.num_samples == len(exp["samples"])
    index = json.loads((data_dir / variant / "index.json").read_text())
    assert [s.id for s in ds.shards] == [c["filename"] for c in index["chunks"]]
    rng = np.random.default_rng(1)
    base = 0
    for shard, info in enumerate(ds.shards):
        order = np.concatenate([rng.permutation(info.num_samples), rng.integers(0, info.num_samples, 5)])
        rows = ds.reader.read(shard, order)
        assert [tagger(r) for r in rows] == [exp["samples"][base + i] for i in order.tolist()]
        base += info.num_samples


def test_value_types_match_litdata(data_dir):
    ds = Dataset.from_path("p", str(data_dir / "pytree"))
    row = ds.reader.read(0, np.array([3]))[0]
    assert list(row) == ["id", "text", "tokens", "image", "score", "flag", "tags", "blob"]
    assert type(row["id"]) is int and type(row["score"]) is float and type(row["flag"]) is bool
    assert row["tokens"].dtype == np.int32 and row["image"].shape == (2, 3) and row["image"].dtype == np.uint8
    assert isinstance(row["tags"], list) and isinstance(row["blob"], bytes)
    assert row["tokens"].flags.writeable, "arrays are copies, not views of the mapped chunk"
    (item,) = Dataset.from_path("t", str(data_dir / "tensors_tuple")).reader.read(0, np.array([0]))
    value = item["item"]
    assert isinstance(value, tuple) and value[1].dtype == np.int64 and value[2].shape == (3, 2)


def test_detection_tells_litdata_from_mds(data_dir, tmp_path):
    from zephon_litdata.detect import detect

    fs = fsspec.filesystem("file")
    root = str(data_dir / "pytree")
    assert detect(fs, root, ["chunk-0-0.bin", "index.json"])
    assert detect(fs, root + "/index.json", ["index.json"])
    mds = tmp_path / "mds"
    mds.mkdir()
    (mds / "index.json").write_text(json.dumps({"version": 2, "shards": [{"format": "mds", "column_encodings": []}]}))
    assert not detect(fs, str(mds), ["index.json"])
    pq = tmp_path / "pq"
    pq.mkdir()
    (pq / "index.json").write_text(json.dumps({"chunks": [], "config": {"item_loader": "ParquetLoader"}}))
    assert not detect(fs, str(pq), ["index.json"])
    assert not detect(fs, str(tmp_path), ["other.json"])
    assert get_plugin_manager().registry.detect_format(root) == "litdata"


def test_reader_pickles_to_its_configuration(data_dir):
    ds = Dataset.from_path("z", str(data_dir / "pytree_zstd_batch"))
    reader = ds.reader
    before = reader.read(1, np.arange(10))
    blob = pickle.dumps(reader)
    assert len(blob) < 16_000, f"a pickled reader should be configuration only, got {len(blob)} bytes"
    clone = pickle.loads(blob)
    assert [r["id"] for r in clone.read(1, np.arange(10))] == [r["id"] for r in before]


def test_pickled_leaves_are_refused(data_dir):
    with pytest.raises(ReaderError, match="pickle.*unpickling"):
        Dataset.from_path("x", str(data_dir / "pickled"))


def test_tokens_need_a_block_size(data_dir):
    with pytest.raises(ConfigError, match="block_size"):
        Dataset.from_path("x", str(data_dir / "tokens"))
    with pytest.raises(ConfigError, match="only to TokensLoader"):
        Dataset.from_path("x", str(data_dir / "pytree"), block_size=8)
    ds = Dataset.from_path("x", str(data_dir / "tokens"), block_size=16)
    assert all(len(r["item"]) == 16 for r in ds.reader.read(0, np.arange(ds.shards[0].num_samples)))


def test_zephon_index_command(data_dir, tmp_path, capsys):
    from zephon_core.cli import main

    # index writes a manifest: never into the committed fixtures
    batch = shutil.copytree(data_dir / "pytree_zstd_batch", tmp_path / "batch")
    assert main(["index", str(batch)]) == 0
    out = capsys.readouterr().out
    assert "litdata: 5 chunks (5 framed-zstd), 100 samples" in out and "agree with index.json" in out
    assert "_zephon_manifest.json" in out and (batch / "_zephon_manifest.json").is_file()
    assert main(["index", str(shutil.copytree(data_dir / "arrow_rows", tmp_path / "arrow"))]) == 0
    assert "3 arrow" in capsys.readouterr().out


def test_locally_decompressed_chunks_are_read_too(data_dir, tmp_path, expected, tagger):
    """LitData's own reader leaves ``chunk-N.bin`` where ``chunk-N.zstd.bin`` was: accept that layout."""
    copy = shutil.copytree(data_dir / "pytree_zstd_chunk", tmp_path / "ds")
    for f in sorted(copy.glob("*.zstd.bin"))[:3]:
        plain = f.with_name(f.name.replace(".zstd.bin", ".bin"))
        plain.write_bytes(zstandard.ZstdDecompressor().decompressobj().decompress(f.read_bytes()))
        f.unlink()
    ds = Dataset.from_path("x", str(copy))
    rows = read_all(ds)
    assert [tagger(r) for r in rows] == expected("pytree_zstd_chunk")["samples"]


def test_arrow_rows_without_pyarrow_say_what_to_install(data_dir, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.ipc", None)
    ds = Dataset.from_path("x", str(data_dir / "arrow_rows"))
    with pytest.raises(ReaderError, match=r"chunk-0-0\.bin.*zephon-litdata\[arrow\]"):
        ds.reader.read(0, np.arange(3))


def test_pytree_chunks_need_no_pyarrow(data_dir, monkeypatch, expected, tagger):
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    ds = Dataset.from_path("x", str(data_dir / "pytree_zstd_sample"))
    assert [tagger(r) for r in ds.reader.read(0, np.arange(4))] == expected("pytree_zstd_sample")["samples"][:4]


@pytest.mark.parametrize("variant", ["pytree_zstd_chunk", "pytree_zstd_batch", "arrow_rows_zstd", "tokens"])
def test_s3_through_the_node_cache(variant, data_dir, expected, tagger, tmp_path):
    """Chunks on a real S3 API (moto on loopback) are downloaded once into the node cache and read."""
    pytest.importorskip("moto")
    pytest.importorskip("s3fs")
    from zephon_testkit.s3 import moto_s3

    exp = expected(variant)
    with moto_s3() as s3:
        s3.upload_dir(str(data_dir / variant), variant)
        ds = Dataset.from_path(
            variant,
            s3.url(variant),
            storage_options=s3.storage_options,
            cache_dir=str(tmp_path / "cache"),
            **_options(exp),
        )
        assert ds.format == "litdata"
        rows = read_all(ds)
    assert [tagger(r) for r in rows] == exp["samples"]
    assert any((tmp_path / "cache" / "shards").iterdir()), "remote chunks go through the node cache"
