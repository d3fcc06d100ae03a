"""Bad LitData input is a clear ReaderError that names the chunk, never garbage or a crash."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from zephon_storage.testing.fixtures import LayoutFaults, copy_variant, read_path
from zephon_storage.testing.readers import run_cli

from zephon_core import Dataset, ReaderError


class TestLitDataFaults(LayoutFaults):
    dataset_format = "litdata"
    variant = "pytree"
    shards_key = "chunks"
    count_key = "chunk_size"
    variants = {  # noqa: RUF012
        "test_missing_shard": ("pytree", "pytree_zstd_chunk", "arrow_rows", "tokens"),
        "test_truncated_shard": (
            "pytree",
            "pytree_zstd_batch",
            "pytree_zstd_chunk",
            "pytree_zstd_sample",
            "arrow_rows",
            "tokens",
        ),
        "test_sample_count_disagrees_with_index": ("pytree", "pytree_zstd_batch", "arrow_rows_zstd"),
        "test_manifest_catches_missing_short_and_dropped_shards": ("pytree", "pytree_zstd_chunk", "tokens"),
        "test_verify_checksum_catches_a_flipped_byte": ("pytree", "pytree_zstd_chunk", "arrow_rows"),
    }
    index_edits = [  # noqa: RUF012
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
    ]

    def shard_file(self, index: dict[str, Any], k: int) -> str:
        return index["chunks"][k]["filename"]

    def variant_options(self, variant: str) -> dict[str, Any]:
        return {"block_size": 8} if variant == "tokens" else {}


def test_corrupt_zstd_frame(data_dir: Path, tmp_path: Path) -> None:
    ds_dir = copy_variant(data_dir, "pytree_zstd_batch", tmp_path)
    chunk = ds_dir / "chunk-0-2.bin"
    data = bytearray(chunk.read_bytes())
    n = struct.unpack_from("<I", data, 12)[0]
    first_frame = struct.unpack_from("<Q", data, 24 + 4 * (n + 1) + 8)[0]
    data[first_frame : first_frame + 4] = b"\xff\xff\xff\xff"  # breaks the zstd frame magic
    chunk.write_bytes(bytes(data))
    with pytest.raises(ReaderError, match=r"chunk-0-2\.bin.*frame 0.*corrupt zstd"):
        read_path(ds_dir)


def test_corrupt_whole_file_zstd(data_dir: Path, tmp_path: Path) -> None:
    ds_dir = copy_variant(data_dir, "pytree_zstd_chunk", tmp_path)
    chunk = ds_dir / "chunk-0-3.zstd.bin"
    chunk.write_bytes(b"\x00" * 16 + chunk.read_bytes()[16:])
    with pytest.raises(ReaderError, match=r"chunk-0-3\.zstd\.bin"):
        read_path(ds_dir)


@pytest.mark.parametrize("variant", ["arrow_rows", "arrow_rows_zstd"])
def test_corrupt_arrow_footer(variant: str, data_dir: Path, tmp_path: Path) -> None:
    ds_dir = copy_variant(data_dir, variant, tmp_path)
    chunk = ds_dir / "chunk-0-1.bin"
    data = bytearray(chunk.read_bytes())
    mid = len(data) // 2
    data[mid : mid + 64] = np.random.default_rng(3).integers(0, 256, 64, dtype=np.uint8).tobytes()
    chunk.write_bytes(bytes(data))
    with pytest.raises(ReaderError, match=r"chunk-0-1\.bin"):
        read_path(ds_dir)


def test_corrupt_item_header(data_dir: Path, tmp_path: Path) -> None:
    ds_dir = copy_variant(data_dir, "pytree", tmp_path)
    chunk = ds_dir / "chunk-0-0.bin"
    data = bytearray(chunk.read_bytes())
    first = struct.unpack_from("<I", data, 4)[0]
    data[first : first + 4] = struct.pack("<I", 10_000)  # the first leaf claims more bytes than the item has
    chunk.write_bytes(bytes(data))
    with pytest.raises(ReaderError, match=r"chunk-0-0\.bin.*corrupt item"):
        read_path(ds_dir)


def test_bad_items_and_frames_are_validated_and_skipped(data_dir: Path, tmp_path: Path) -> None:
    """A bad zstd frame drops its items (reported once, as a run), nothing else."""
    ds_dir = copy_variant(data_dir, "pytree_zstd_batch", tmp_path)
    chunk = ds_dir / "chunk-0-2.bin"
    data = bytearray(chunk.read_bytes())
    n, per_frame = struct.unpack_from("<II", data, 12)
    first_frame = struct.unpack_from("<Q", data, 24 + 4 * (n + 1) + 8)[0]
    data[first_frame : first_frame + 4] = b"\xff\xff\xff\xff"
    chunk.write_bytes(bytes(data))
    code, out, _ = run_cli("index", str(ds_dir), "--validate", "--jobs", "1")
    (line,) = [x for x in out.splitlines() if "chunk-0-2.bin" in x]
    assert code == 1 and "frame 0: corrupt zstd data" in line and line.endswith(f"records: 0-{per_frame - 1})")
    ds = Dataset.from_path("x", str(ds_dir), on_error="skip", max_bad_fraction=0.5)
    rows = ds.reader.read_or_skip(2, np.arange(ds.shards[2].num_samples))
    assert rows[:per_frame] == [None] * per_frame and None not in rows[per_frame:]
