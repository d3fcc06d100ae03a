"""Bad input for zephon-parquet: every fault is a ReaderError naming the file, and nothing hangs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from zephon_storage.testing.readers import run_cli
from zephon_storage.testing.s3 import S3ColumnarReaderFaults

from zephon_core import Dataset, ReaderError

pytestmark = pytest.mark.timeout(60)


class TestParquetFaults(S3ColumnarReaderFaults):
    dataset_format = "parquet"
    suffix = ".parquet"
    label = "Parquet"
    replaced = "row groups .* disagree with the listing"
    samples = 2000

    def write(self, path: Path, records: list[dict]) -> None:
        pq.write_table(pa.Table.from_pylist(records), path, row_group_size=500, write_page_checksum=True)

    def build_index(self, path: str) -> str:
        from zephon_parquet.index import build_index

        return build_index(path)

    @staticmethod
    def corrupt_row_group_1(path: Path) -> None:
        """Flip bytes inside a data page of row group 1 (rows 500-999)."""
        meta = pq.read_metadata(path)
        col = meta.row_group(1).column(1)  # the text column of row group 1
        start = col.data_page_offset
        data = bytearray(path.read_bytes())
        for k in range(start + 40, start + 140):
            data[k] ^= 0x5A
        path.write_bytes(bytes(data))

    def test_corrupt_page_is_detected(self, one_file: Path, docs: list[dict]) -> None:
        """Bytes flipped inside a data page: the page checksum (or the decoder) rejects the row group."""
        self.corrupt_row_group_1(one_file / "part.parquet")
        ds = Dataset.from_path("x", str(one_file))
        assert ds.reader.read(0, np.array([0]))[0] == docs[0]  # row group 0 is intact
        with pytest.raises(ReaderError, match=r"part\.parquet: row group 1 cannot be decoded"):
            ds.reader.read(0, np.array([600]))

    def test_bad_row_group_is_validated_and_skipped(self, one_file: Path, docs: list[dict]) -> None:
        """``--validate`` reports the row group's rows once; ``on_error="skip"`` drops exactly them."""
        self.corrupt_row_group_1(one_file / "part.parquet")
        code, out, _ = run_cli("index", str(one_file), "--validate", "--jobs", "1")
        assert code == 1
        assert "part.parquet: row group 1 cannot be decoded (rows 500-999: " in out and "(500 records: 500-999)" in out
        assert "2000 record(s): 500 bad record(s), 0 unreadable file(s)" in out
        ds = Dataset.from_path("x", str(one_file), on_error="skip", max_bad_fraction=0.5)
        rows = ds.reader.read_or_skip(0, np.array([10, 600, 999, 1500]))
        assert rows == [docs[10], None, None, docs[1500]]
