"""Bad MDS input is a clear ReaderError that names the shard, never garbage or a crash."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from zephon_storage.testing.fixtures import LayoutFaults, copy_variant, edit_index, read_path
from zephon_storage.testing.readers import run_cli

from zephon_core import Dataset, ReaderError


class TestMDSFaults(LayoutFaults):
    dataset_format = "mds"
    variant = "plain"
    shards_key = "shards"
    count_key = "samples"
    variants = {  # noqa: RUF012
        "test_missing_shard": ("plain", "zstd", "gz"),
        "test_truncated_shard": ("plain", "zstd", "gz"),
        "test_manifest_catches_missing_short_and_dropped_shards": ("plain", "zstd"),
        "test_verify_checksum_catches_a_flipped_byte": ("plain", "gz"),
    }
    index_edits = [  # noqa: RUF012
        (
            lambda idx: idx["shards"][0]["column_encodings"].__setitem__(0, "complex128"),
            "'complex128' is not supported",
        ),
        (lambda idx: idx["shards"][0].update(compression="lz4", zip_data={"basename": "x.lz4"}), "compression 'lz4'"),
        (lambda idx: idx["shards"][0]["column_sizes"].__setitem__(5, 3), "column .*has .* bytes, index says 3"),
        (lambda idx: idx.update(version=3), "version 3"),
        (lambda idx: idx["shards"][0]["raw_data"].update(basename="/etc/passwd"), "bad basename"),
    ]

    def shard_file(self, index: dict[str, Any], k: int) -> str:
        s = index["shards"][k]
        return (s["zip_data"] or s["raw_data"])["basename"]


def test_shard_size_disagrees_with_index(data_dir: Path, tmp_path: Path) -> None:
    ds_dir = copy_variant(data_dir, "plain", tmp_path)
    edit_index(
        ds_dir, lambda idx: idx["shards"][1]["raw_data"].update(bytes=idx["shards"][1]["raw_data"]["bytes"] + 7)
    )
    with pytest.raises(ReaderError, match=r"shard\.00001\.mds.*truncated"):
        read_path(ds_dir)


def corrupt_first_sample(ds_dir: Path) -> int:
    """Make sample 0 of ``shard.00000.mds`` undecodable; returns its byte offset."""
    shard = ds_dir / "shard.00000.mds"
    data = bytearray(shard.read_bytes())
    first = struct.unpack_from("<I", data, 4)[0]
    data[first : first + 4] = struct.pack("<I", 1 << 20)  # a variable column claims 1 MiB
    shard.write_bytes(bytes(data))
    return first


def test_corrupt_sample_sizes(data_dir: Path, tmp_path: Path) -> None:
    ds_dir = copy_variant(data_dir, "plain", tmp_path)
    corrupt_first_sample(ds_dir)
    with pytest.raises(ReaderError, match=r"shard\.00000\.mds.*corrupt sample"):
        read_path(ds_dir)


def test_bad_sample_is_validated_and_skipped(data_dir: Path, tmp_path: Path) -> None:
    ds_dir = copy_variant(data_dir, "plain", tmp_path)
    byte = corrupt_first_sample(ds_dir)
    code, out, _ = run_cli("index", str(ds_dir), "--validate", "--jobs", "2")
    assert code == 1
    assert f"shard.00000.mds' (shard 0): corrupt sample 0 (byte {byte}; ValueError" in out
    assert "1 bad record(s), 0 unreadable file(s)" in out
    ds = Dataset.from_path("x", str(ds_dir), on_error="skip")
    rows = ds.reader.read_or_skip(0, np.arange(4))
    assert rows[0] is None and all(r is not None for r in rows[1:])


def test_corrupt_zstd_shard(data_dir: Path, tmp_path: Path) -> None:
    ds_dir = copy_variant(data_dir, "zstd", tmp_path)
    shard = ds_dir / "shard.00003.mds.zstd"
    shard.write_bytes(b"\x00" * 8 + shard.read_bytes()[8:])
    with pytest.raises(ReaderError, match=r"shard\.00003\.mds\.zstd.*corrupt zstd"):
        read_path(ds_dir)


def test_corruption_caught_by_recorded_hash(data_dir: Path, tmp_path: Path) -> None:
    """A flipped byte inside a string decodes fine; the writer's sha1 catches it when asked to."""
    import zstandard

    ds_dir = copy_variant(data_dir, "zstd", tmp_path)
    victim = ds_dir / "shard.00001.mds.zstd"
    raw = bytearray(zstandard.ZstdDecompressor().stream_reader(victim.read_bytes()).read())
    raw[-3] ^= 0x01
    victim.write_bytes(zstandard.ZstdCompressor().compress(bytes(raw)))
    edit_index(ds_dir, lambda idx: idx["shards"][1]["zip_data"].update(bytes=victim.stat().st_size))
    read_path(ds_dir)  # no checksum asked for: silently different, as with Streaming's default
    with pytest.raises(ReaderError, match=r"shard\.00001\.mds\.zstd.*sha1 digest .* corrupt shard"):
        read_path(ds_dir, verify_hashes=True)
