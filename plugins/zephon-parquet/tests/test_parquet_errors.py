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


@pytest.mark.slow
def test_remote_footers_are_read_together_and_the_first_bad_file_is_named(tmp_path, monkeypatch):
    """Listing a remote dataset reads its footers several at a time; errors still name the first bad file."""
    pytest.importorskip("moto.server")
    import threading
    import time

    from zephon_parquet.reader import ParquetReader
    from zephon_testkit.s3 import moto_s3

    local = tmp_path / "one.parquet"
    pq.write_table(pa.Table.from_pylist([{"id": i, "text": "x" * i} for i in range(50)]), local)
    state = {"now": 0, "most": 0}
    lock = threading.Lock()
    footer = ParquetReader._footer

    def counted(self, i):  # how many footer reads are in flight at once
        with lock:
            state["now"] += 1
            state["most"] = max(state["most"], state["now"])
        try:
            time.sleep(0.05)
            return footer(self, i)
        finally:
            with lock:
                state["now"] -= 1

    monkeypatch.setattr(ParquetReader, "_footer", counted)
    with moto_s3("footers") as s3:
        for k in range(6):
            s3.put(f"good/part-{k}.parquet", local.read_bytes())
            s3.put(f"bad/part-{k}.parquet", b"\0" * 100 if k in (2, 4) else local.read_bytes())
        ds = Dataset.from_path("x", s3.url("good"), format="parquet", storage_options=s3.storage_options)
        assert sum(s.num_samples for s in ds.reader.shards()) == 300
        assert state["most"] > 1
        with pytest.raises(ReaderError, match=r"s3://footers/bad/part-2\.parquet: not a readable Parquet file"):
            Dataset.from_path("x", s3.url("bad"), format="parquet", storage_options=s3.storage_options)
