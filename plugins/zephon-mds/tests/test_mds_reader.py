"""Every MDS fixture read natively, sample by sample, against what Streaming wrote and read back."""

from __future__ import annotations

import json
import pickle
import shutil
from decimal import Decimal

import fsspec
import numpy as np
import pytest
from zephon_storage.testing.readers import read_all

from zephon_core import Dataset, ReaderError
from zephon_core.plugins import get_plugin_manager

READABLE = ("plain", "zstd", "gz")


@pytest.mark.parametrize("variant", READABLE)
def test_every_sample_matches_what_streaming_wrote(variant, data_dir, expected, tagger):
    exp = expected(variant)["samples"]
    ds = Dataset.from_path(variant, str(data_dir / variant))
    assert ds.format == "mds" and ds.num_samples == len(exp) and len(ds.shards) >= 3
    index = json.loads((data_dir / variant / "index.json").read_text())
    assert [s.id for s in ds.shards] == [(s["zip_data"] or s["raw_data"])["basename"] for s in index["shards"]]
    rng = np.random.default_rng(2)
    base = 0
    for shard, info in enumerate(ds.shards):
        order = np.concatenate([rng.permutation(info.num_samples), rng.integers(0, info.num_samples, 5)])
        rows = ds.reader.read(shard, order)
        assert [tagger(r) for r in rows] == [exp[base + i] for i in order.tolist()]
        base += info.num_samples


def test_value_types_match_streaming(data_dir):
    row = Dataset.from_path("p", str(data_dir / "plain")).reader.read(0, np.array([5]))[0]
    assert type(row["id"]) is int and type(row["text"]) is str and type(row["blob"]) is bytes
    assert row["i8"].dtype == np.int8 and row["u64"].dtype == np.uint64 and row["f16"].dtype == np.float16
    assert isinstance(row["i8"], np.generic), "fixed-width scalars are numpy scalars, as in Streaming"
    assert row["image"].shape == (2, 3) and row["tokens"].dtype == np.int32 and row["anyarr"].dtype == np.float32
    assert isinstance(row["sd"], Decimal) and isinstance(row["si"], int) and isinstance(row["meta"], dict)
    assert row["png"][:8] == b"\x89PNG\r\n\x1a\n", "png columns come back as their encoded bytes"
    assert row["pil"].shape == (3, 4) and row["pil"].dtype == np.uint8, "pil columns come back as pixels"
    assert row["tokens"].flags.writeable


def test_detection_tells_mds_from_litdata(data_dir, tmp_path):
    from zephon_mds.detect import detect

    fs = fsspec.filesystem("file")
    assert detect(fs, str(data_dir / "zstd"), ["index.json", "shard.00000.mds.zstd"])
    assert detect(fs, str(data_dir / "zstd" / "index.json"), ["index.json"])
    lit = tmp_path / "lit"
    lit.mkdir()
    (lit / "index.json").write_text(json.dumps({"chunks": [], "config": {"item_loader": "PyTreeLoader"}}))
    assert not detect(fs, str(lit), ["index.json"])
    js = tmp_path / "js"
    js.mkdir()
    (js / "index.json").write_text(json.dumps({"version": 2, "shards": [{"format": "json", "columns": {}}]}))
    assert not detect(fs, str(js), ["index.json"])
    assert get_plugin_manager().registry.detect_format(str(data_dir / "plain")) == "mds"


def test_reader_pickles_to_its_configuration(data_dir):
    reader = Dataset.from_path("z", str(data_dir / "zstd")).reader
    before = reader.read(2, np.arange(5))
    blob = pickle.dumps(reader)
    assert len(blob) < 64_000, f"a pickled reader should be configuration only, got {len(blob)} bytes"
    assert [r["id"] for r in pickle.loads(blob).read(2, np.arange(5))] == [r["id"] for r in before]


def test_pkl_columns_are_refused(data_dir):
    with pytest.raises(ReaderError, match=r"column 'obj'.*'pkl'.*unpickling"):
        Dataset.from_path("x", str(data_dir / "pickled"))


def test_zephon_index_command(data_dir, tmp_path, capsys):
    from zephon_core.cli import main

    copy = shutil.copytree(data_dir / "zstd", tmp_path / "ds")  # index writes a manifest: never into the fixtures
    assert main(["index", str(copy)]) == 0
    out = capsys.readouterr().out
    assert "mds: " in out and "120 samples, compression zstd" in out and "agree with index.json" in out
    assert "_zephon_manifest.json" in out and (copy / "_zephon_manifest.json").is_file()


def test_streaming_local_cache_layout_is_read_too(data_dir, tmp_path, expected, tagger):
    """Streaming keeps only the decompressed ``.mds`` of a compressed shard in its local cache."""
    import zstandard

    copy = shutil.copytree(data_dir / "zstd", tmp_path / "ds")
    for f in sorted(copy.glob("*.mds.zstd"))[::2]:
        f.with_name(f.name[: -len(".zstd")]).write_bytes(
            zstandard.ZstdDecompressor().stream_reader(f.read_bytes()).read()
        )
        f.unlink()
    ds = Dataset.from_path("x", str(copy))
    rows = read_all(ds)
    assert [tagger(r) for r in rows] == expected("zstd")["samples"]


def test_verify_hashes_checks_a_good_dataset(data_dir):
    ds = Dataset.from_path("x", str(data_dir / "zstd"), verify_hashes=True)
    assert ds.reader.check() == len(ds.shards)


def test_verify_hashes_without_recorded_hashes_is_a_no_op(data_dir):
    assert Dataset.from_path("x", str(data_dir / "plain"), verify_hashes=True).reader.check() > 0


@pytest.mark.parametrize("variant", ["plain", "zstd", "gz"])
def test_s3_through_the_node_cache(variant, data_dir, expected, tagger, tmp_path):
    """Shards on a real S3 API (moto on loopback) are downloaded once into the node cache and read."""
    pytest.importorskip("moto")
    pytest.importorskip("s3fs")
    from zephon_testkit.s3 import moto_s3

    with moto_s3() as s3:
        s3.upload_dir(str(data_dir / variant), variant)
        ds = Dataset.from_path(
            variant, s3.url(variant), storage_options=s3.storage_options, cache_dir=str(tmp_path / "cache")
        )
        assert ds.format == "mds"
        rows = read_all(ds)
    assert [tagger(r) for r in rows] == expected(variant)["samples"]
    assert any((tmp_path / "cache" / "shards").iterdir()), "remote shards go through the node cache"
