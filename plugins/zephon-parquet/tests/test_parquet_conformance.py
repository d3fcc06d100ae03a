"""The kernel's reader conformance suite on parquet files written by the format's own writer."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.corpus import documents  # noqa: E402
from tests.readerkit import split  # noqa: E402
from zephon_core.conformance import ReaderConformance  # noqa: E402

SHARDS = split(documents(limit=360), [100, 140, 120])


class TestParquetConformance(ReaderConformance):
    @pytest.fixture(autouse=True)
    def _cache(self, tmp_path, monkeypatch):
        monkeypatch.setenv("ZEPHON_CACHE_DIR", str(tmp_path / "zephon-cache"))

    @pytest.fixture
    def reader_path(self, tmp_path):
        import pyarrow as pa
        import pyarrow.parquet as pq

        folder = tmp_path / "ds"
        folder.mkdir()
        for k, recs in enumerate(SHARDS):
            pq.write_table(
                pa.Table.from_pylist(recs), folder / f"part-{k}.parquet", row_group_size=32, write_page_checksum=True
            )
        from zephon_parquet.index import build_index

        build_index(str(folder))  # `zephon index`: the manifest lets a missing shard be detected
        return str(folder)

    @pytest.fixture
    def reader_format(self):
        return "parquet"

    @pytest.fixture
    def expected_samples(self):
        return SHARDS
