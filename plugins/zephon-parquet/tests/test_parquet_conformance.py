"""The kernel's reader conformance suite on parquet files written by the format's own writer."""

from __future__ import annotations

from pathlib import Path

from zephon_storage.testing.readers import CorpusConformance


class TestParquetConformance(CorpusConformance):
    dataset_format = "parquet"

    def write(self, folder: Path, shards: list[list[dict]]) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq
        from zephon_parquet.index import build_index

        for k, recs in enumerate(shards):
            pq.write_table(
                pa.Table.from_pylist(recs), folder / f"part-{k}.parquet", row_group_size=32, write_page_checksum=True
            )
        build_index(str(folder))  # `zephon index`: the manifest lets a missing shard be detected
