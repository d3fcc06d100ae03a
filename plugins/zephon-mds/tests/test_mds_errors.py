"""Bad MDS input is a clear ReaderError that names the shard, never garbage or a crash."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

from zephon_core import Dataset, Pipeline, ReaderError, StaticMixtureWorkSource, ZephonError


def _copy(data_dir: Path, variant: str, tmp_path: Path) -> Path:
    return Path(shutil.copytree(data_dir / variant, tmp_path / variant))


def _read_all(path: Path, **options) -> None:
    ds = Dataset.from_path("x", str(path), **options)
    for shard, info in enumerate(ds.shards):
        ds.reader.read(shard, np.arange(info.num_samples))


def _edit_index(path: Path, edit) -> None:
    index = json.loads((path / "index.json").read_text())
    edit(index)
    (path / "index.json").write_text(json.dumps(index))


def _name(path: Path, k: int) -> str:
    s = json.loads((path / "index.json").read_text())["shards"][k]
    return (s["zip_data"] or s["raw_data"])["basename"]


@pytest.mark.parametrize("variant", ["plain", "zstd", "gz"])
def test_missing_shard(variant, data_dir, tmp_path):
    ds_dir = _copy(data_dir, variant, tmp_path)
    victim = _name(ds_dir, 1)
    (ds_dir / victim).unlink()
    with pytest.raises(ReaderError, match=victim.replace(".", r"\.")):
        _read_all(ds_dir)


@pytest.mark.parametrize("variant", ["plain", "zstd", "gz"])
def test_truncated_shard(variant, data_dir, tmp_path):
    ds_dir = _copy(data_dir, variant, tmp_path)
    victim = _name(ds_dir, 0)
    data = (ds_dir / victim).read_bytes()
    (ds_dir / victim).write_bytes(data[: len(data) * 2 // 3])
    with pytest.raises(ReaderError, match=victim.replace(".", r"\.")):
        _read_all(ds_dir)


def test_sample_count_disagrees_with_index(data_dir, tmp_path):
    ds_dir = _copy(data_dir, "plain", tmp_path)
    _edit_index(ds_dir, lambda idx: idx["shards"][2].update(samples=idx["shards"][2]["samples"] + 1))
    with pytest.raises(ReaderError, match=r"shard\.00002\.mds.*index\.json says"):
        _read_all(ds_dir)


def test_shard_size_disagrees_with_index(data_dir, tmp_path):
    ds_dir = _copy(data_dir, "plain", tmp_path)
    _edit_index(
        ds_dir, lambda idx: idx["shards"][1]["raw_data"].update(bytes=idx["shards"][1]["raw_data"]["bytes"] + 7)
    )
    with pytest.raises(ReaderError, match=r"shard\.00001\.mds.*truncated"):
        _read_all(ds_dir)


def test_corrupt_sample_sizes(data_dir, tmp_path):
    ds_dir = _copy(data_dir, "plain", tmp_path)
    shard = ds_dir / "shard.00000.mds"
    data = bytearray(shard.read_bytes())
    first = struct.unpack_from("<I", data, 4)[0]
    data[first : first + 4] = struct.pack("<I", 1 << 20)  # a variable column claims 1 MiB
    shard.write_bytes(bytes(data))
    with pytest.raises(ReaderError, match=r"shard\.00000\.mds.*corrupt sample"):
        _read_all(ds_dir)


def test_corrupt_zstd_shard(data_dir, tmp_path):
    ds_dir = _copy(data_dir, "zstd", tmp_path)
    shard = ds_dir / "shard.00003.mds.zstd"
    shard.write_bytes(b"\x00" * 8 + shard.read_bytes()[8:])
    with pytest.raises(ReaderError, match=r"shard\.00003\.mds\.zstd.*corrupt zstd"):
        _read_all(ds_dir)


def test_corruption_caught_by_recorded_hash(data_dir, tmp_path):
    """A flipped byte inside a string decodes fine; the writer's sha1 catches it when asked to."""
    ds_dir = _copy(data_dir, "zstd", tmp_path)
    import zstandard

    victim = ds_dir / "shard.00001.mds.zstd"
    raw = bytearray(zstandard.ZstdDecompressor().stream_reader(victim.read_bytes()).read())
    raw[-3] ^= 0x01
    victim.write_bytes(zstandard.ZstdCompressor().compress(bytes(raw)))
    _edit_index(ds_dir, lambda idx: idx["shards"][1]["zip_data"].update(bytes=victim.stat().st_size))
    _read_all(ds_dir)  # no checksum asked for: silently different, as with Streaming's default
    with pytest.raises(ReaderError, match=r"shard\.00001\.mds\.zstd.*sha1 digest .* corrupt shard"):
        _read_all(ds_dir, verify_hashes=True)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda idx: idx["shards"][0]["column_encodings"].__setitem__(0, "complex128"),
            "'complex128' is not supported",
        ),
        (lambda idx: idx["shards"][0].update(compression="lz4", zip_data={"basename": "x.lz4"}), "compression 'lz4'"),
        (lambda idx: idx["shards"][0]["column_sizes"].__setitem__(5, 3), "column .*has .* bytes, index says 3"),
        (lambda idx: idx.update(version=3), "version 3"),
        (lambda idx: idx["shards"][0]["raw_data"].update(basename="/etc/passwd"), "bad basename"),
    ],
)
def test_unsupported_index_is_refused_up_front(edit, message, data_dir, tmp_path):
    ds_dir = _copy(data_dir, "plain", tmp_path)
    _edit_index(ds_dir, edit)
    with pytest.raises(ReaderError, match=message):
        Dataset.from_path("x", str(ds_dir), format="mds")


def test_broken_index_json(data_dir, tmp_path):
    ds_dir = _copy(data_dir, "plain", tmp_path)
    (ds_dir / "index.json").write_text("{")
    with pytest.raises(ReaderError, match="index.json is not valid JSON"):
        Dataset.from_path("x", str(ds_dir), format="mds")


def test_out_of_range_index(data_dir):
    ds = Dataset.from_path("x", str(data_dir / "plain"))
    n = ds.shards[0].num_samples
    with pytest.raises(ReaderError, match=f"sample index {n} out of range"):
        ds.reader.read(0, np.array([n]))


def test_pipeline_error_names_the_shard(data_dir, tmp_path):
    ds_dir = _copy(data_dir, "zstd", tmp_path)
    (ds_dir / "shard.00002.mds.zstd").unlink()
    ds = Dataset.from_path("x", str(ds_dir))
    pipe = Pipeline(StaticMixtureWorkSource([ds], chunk_size=16)).map_transform(_Id()).batch(4)
    with pytest.raises(ZephonError, match=r"shard\.00002\.mds\.zstd"), pipe:
        for _ in pipe:
            pass


class _Id:
    def __call__(self, row):
        return {"id": row["id"]}
