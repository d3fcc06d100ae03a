"""Bad LitData input is a clear ReaderError that names the chunk, never garbage or a crash."""

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


@pytest.mark.parametrize("variant", ["pytree", "pytree_zstd_chunk", "arrow_rows", "tokens"])
def test_missing_chunk(variant, data_dir, tmp_path):
    ds_dir = _copy(data_dir, variant, tmp_path)
    victim = json.loads((ds_dir / "index.json").read_text())["chunks"][1]["filename"]
    (ds_dir / victim).unlink()
    with pytest.raises(ReaderError, match=victim.replace(".", r"\.")):
        _read_all(ds_dir, **({"block_size": 8} if variant == "tokens" else {}))


@pytest.mark.parametrize(
    "variant", ["pytree", "pytree_zstd_batch", "pytree_zstd_chunk", "pytree_zstd_sample", "arrow_rows", "tokens"]
)
def test_truncated_chunk(variant, data_dir, tmp_path):
    ds_dir = _copy(data_dir, variant, tmp_path)
    victim = json.loads((ds_dir / "index.json").read_text())["chunks"][0]["filename"]
    data = (ds_dir / victim).read_bytes()
    (ds_dir / victim).write_bytes(data[: len(data) * 2 // 3])
    with pytest.raises(ReaderError, match=victim.replace(".", r"\.")):
        _read_all(ds_dir, **({"block_size": 8} if variant == "tokens" else {}))


@pytest.mark.parametrize("variant", ["pytree", "pytree_zstd_batch", "arrow_rows_zstd"])
def test_sample_count_disagrees_with_index(variant, data_dir, tmp_path):
    ds_dir = _copy(data_dir, variant, tmp_path)
    _edit_index(ds_dir, lambda idx: idx["chunks"][1].update(chunk_size=idx["chunks"][1]["chunk_size"] - 1))
    with pytest.raises(ReaderError, match=r"chunk-0-1\.bin.*index\.json says"):
        _read_all(ds_dir)


def test_corrupt_zstd_frame(data_dir, tmp_path):
    ds_dir = _copy(data_dir, "pytree_zstd_batch", tmp_path)
    chunk = ds_dir / "chunk-0-2.bin"
    data = bytearray(chunk.read_bytes())
    n = struct.unpack_from("<I", data, 12)[0]
    first_frame = struct.unpack_from("<Q", data, 24 + 4 * (n + 1) + 8)[0]
    data[first_frame : first_frame + 4] = b"\xff\xff\xff\xff"  # breaks the zstd frame magic
    chunk.write_bytes(bytes(data))
    with pytest.raises(ReaderError, match=r"chunk-0-2\.bin.*frame 0.*corrupt zstd"):
        _read_all(ds_dir)


def test_corrupt_whole_file_zstd(data_dir, tmp_path):
    ds_dir = _copy(data_dir, "pytree_zstd_chunk", tmp_path)
    chunk = ds_dir / "chunk-0-3.zstd.bin"
    chunk.write_bytes(b"\x00" * 16 + chunk.read_bytes()[16:])
    with pytest.raises(ReaderError, match=r"chunk-0-3\.zstd\.bin"):
        _read_all(ds_dir)


@pytest.mark.parametrize("variant", ["arrow_rows", "arrow_rows_zstd"])
def test_corrupt_arrow_footer(variant, data_dir, tmp_path):
    ds_dir = _copy(data_dir, variant, tmp_path)
    chunk = ds_dir / "chunk-0-1.bin"
    data = bytearray(chunk.read_bytes())
    mid = len(data) // 2
    data[mid : mid + 64] = np.random.default_rng(3).integers(0, 256, 64, dtype=np.uint8).tobytes()
    chunk.write_bytes(bytes(data))
    with pytest.raises(ReaderError, match=r"chunk-0-1\.bin"):
        _read_all(ds_dir)


def test_corrupt_item_header(data_dir, tmp_path):
    ds_dir = _copy(data_dir, "pytree", tmp_path)
    chunk = ds_dir / "chunk-0-0.bin"
    data = bytearray(chunk.read_bytes())
    first = struct.unpack_from("<I", data, 4)[0]
    data[first : first + 4] = struct.pack("<I", 10_000)  # the first leaf claims more bytes than the item has
    chunk.write_bytes(bytes(data))
    with pytest.raises(ReaderError, match=r"chunk-0-0\.bin.*corrupt item"):
        _read_all(ds_dir)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda idx: idx["config"].update(item_loader="TemporalArrayLoader"), "item_loader 'TemporalArrayLoader'"),
        (lambda idx: idx["config"].update(encryption={"algorithm": "fernet"}), "encrypted"),
        (lambda idx: idx["config"]["data_format"].__setitem__(1, "video:mp4"), "'video:mp4' is not supported"),
        (lambda idx: idx["config"].update(compression="lz4"), "compression 'lz4'"),
        (lambda idx: idx["chunks"][0].update(filename="../outside.bin"), "bad filename"),
        (
            lambda idx: idx["config"].update(
                data_spec='[1, {"type": "my.Class", "context": "x", "children_spec": []}]'
            ),
            "node type 'my.Class' is not supported",
        ),
    ],
)
def test_unsupported_index_is_refused_up_front(edit, message, data_dir, tmp_path):
    ds_dir = _copy(data_dir, "pytree", tmp_path)
    _edit_index(ds_dir, edit)
    with pytest.raises(ReaderError, match=message):
        Dataset.from_path("x", str(ds_dir), format="litdata")


def test_broken_index_json(data_dir, tmp_path):
    ds_dir = _copy(data_dir, "pytree", tmp_path)
    (ds_dir / "index.json").write_text('{"chunks": [')
    with pytest.raises(ReaderError, match="index.json is not valid JSON"):
        Dataset.from_path("x", str(ds_dir), format="litdata")


def test_out_of_range_index(data_dir):
    ds = Dataset.from_path("x", str(data_dir / "pytree"))
    with pytest.raises(ReaderError, match="sample index 24 out of range"):
        ds.reader.read(0, np.array([0, 24]))


def test_pipeline_error_names_the_chunk(data_dir, tmp_path):
    ds_dir = _copy(data_dir, "pytree", tmp_path)
    (ds_dir / "chunk-0-3.bin").unlink()
    ds = Dataset.from_path("x", str(ds_dir))
    pipe = Pipeline(StaticMixtureWorkSource([ds], chunk_size=16)).map_transform(_Id()).batch(4)
    with pytest.raises(ZephonError, match=r"chunk-0-3\.bin"), pipe:
        for _ in pipe:
            pass


class _Id:
    def __call__(self, row):
        return {"id": row["id"]}
