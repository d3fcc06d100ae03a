"""The kernel's reader conformance suite on data written by ``datasets``: a save_to_disk folder and a hub layout.

Neither Arrow IPC files nor the Parquet files ``datasets`` writes carry checksums of their data
(``to_parquet`` writes no page CRCs), so bytes corrupted inside a value can decode into another
valid value. The suite's corrupt-shard case therefore runs with ``verify="checksum"`` (the manifest
written by ``zephon index --checksum``), the way such data is protected; every other check,
missing and truncated shards included, runs with the default options.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest
from zephon_storage.testing.readers import CorpusConformance


class HFConformance(CorpusConformance):
    """The shared part: datasets offline, the index with checksums, checksums for the corrupt case."""

    __test__ = False
    dataset_format = "hf"
    options: ClassVar[dict[str, Any]] = {}

    @pytest.fixture(autouse=True)
    def _datasets(self, hf: Any) -> None:
        self.hf = hf

    @pytest.fixture
    def reader_options(self, request: pytest.FixtureRequest) -> dict[str, Any]:
        corrupt = "corrupt" in request.node.name
        return {**self.options, **({"verify": "checksum"} if corrupt else {})}

    def index(self, folder: Path) -> None:
        from zephon_hf.index import build_index

        build_index(str(folder), checksum=True)  # `zephon index --checksum`


class TestSaveToDiskConformance(HFConformance):
    """A ``DatasetDict`` saved by ``datasets``: the train split (three Arrow files) is read."""

    shard_sizes = (120, 120, 120)  # save_to_disk(num_shards=3) cuts 360 rows into equal files
    options: ClassVar[dict[str, Any]] = {"split": "train"}

    def write(self, folder: Path, shards: list[list[dict]]) -> None:
        rows = [r for s in shards for r in s]
        dd = self.hf.DatasetDict(
            {"train": self.hf.Dataset.from_list(rows), "test": self.hf.Dataset.from_list(rows[:7])}
        )
        dd.save_to_disk(str(folder), num_shards={"train": len(shards), "test": 1})
        self.index(folder)


class TestHubParquetConformance(HFConformance):
    """``data/train-0000k-of-00003.parquet`` and a test split, written by ``Dataset.to_parquet``."""

    options: ClassVar[dict[str, Any]] = {"split": "train"}

    def write(self, folder: Path, shards: list[list[dict]]) -> None:
        (folder / "data").mkdir()
        for k, rows in enumerate(shards):
            self.hf.Dataset.from_list(rows).to_parquet(
                str(folder / "data" / f"train-{k:05d}-of-{len(shards):05d}.parquet")
            )
        self.hf.Dataset.from_list(shards[0][:7]).to_parquet(str(folder / "data" / "test-00000-of-00001.parquet"))
        self.index(folder)

    def test_detected_format_is_this_one(self, reader_path, reader_format, zephon_plugins):
        """A hub layout is also a folder of Parquet files: hf claims it, and so does zephon-parquet."""
        from zephon_hf.detect import detect

        from zephon_core import ReaderError

        files = sorted(str(p.relative_to(reader_path)) for p in Path(reader_path).rglob("*") if p.is_file())
        assert detect(None, reader_path, files)
        registry = zephon_plugins.registry
        if "parquet" not in registry.names("reader"):
            assert registry.detect_format(reader_path) == "hf"
            return
        with pytest.raises(ReaderError, match=r"looks like several formats \['hf', 'parquet'\]; pass format="):
            registry.detect_format(reader_path)
