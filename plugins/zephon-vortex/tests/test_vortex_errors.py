"""Bad input for zephon-vortex: every fault is a ReaderError naming the file, and nothing hangs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import vortex as vx
from zephon_storage.testing.readers import run_cli
from zephon_storage.testing.s3 import S3ColumnarReaderFaults

from zephon_core import Dataset, ReaderError

pytestmark = pytest.mark.timeout(60)


class TestVortexFaults(S3ColumnarReaderFaults):
    dataset_format = "vortex"
    suffix = ".vortex"
    label = "Vortex"
    replaced = "has 10 rows but the dataset listed 3000"
    samples = 3000

    def write(self, path: Path, records: list[dict]) -> None:
        vx.io.write(vx.array(pa.Table.from_pylist(records)), str(path))

    def build_index(self, path: str) -> str:
        from zephon_vortex.index import build_index

        return build_index(path)

    def test_corrupt_footer(self, one_file: Path) -> None:
        path = one_file / "part.vortex"
        data = bytearray(path.read_bytes())
        for k in range(len(data) - 300, len(data) - 20, 7):
            data[k] ^= 0xFF
        path.write_bytes(bytes(data))
        with pytest.raises(ReaderError, match=r"part\.vortex: not a readable Vortex file"):
            Dataset.from_path("x", str(one_file))

    def test_corrupt_data_segment(self, one_file: Path) -> None:
        """Zeroed bytes in the middle of the data: decoding fails with an error naming the file."""
        path = one_file / "part.vortex"
        data = bytearray(path.read_bytes())
        mid = len(data) // 2
        data[mid : mid + 2000] = bytes(2000)
        path.write_bytes(bytes(data))
        ds = Dataset.from_path("x", str(one_file))
        with pytest.raises(ReaderError, match=r"part\.vortex: rows cannot be decoded"):
            ds.reader.read(0, np.arange(self.samples))

    def test_undecodable_rows_are_validated_and_skipped(self, one_file: Path, docs: list[dict]) -> None:
        path = one_file / "part.vortex"
        data = bytearray(path.read_bytes())
        mid = len(data) // 2
        data[mid : mid + 2000] = bytes(2000)
        path.write_bytes(bytes(data))
        code, out, _ = run_cli("index", str(one_file), "--validate", "--jobs", "1")
        assert code == 1 and "part.vortex: rows cannot be decoded (row " in out
        ds = Dataset.from_path("x", str(one_file), on_error="skip", max_bad_fraction=1.0)
        rows = ds.reader.read_or_skip(0, np.arange(self.samples))
        assert 0 < rows.count(None) < len(rows)
        assert all(r == docs[i] for i, r in enumerate(rows) if r is not None)
