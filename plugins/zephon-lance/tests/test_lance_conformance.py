"""The kernel's reader conformance suite on Lance datasets written by ``lance.write_dataset``.

Shard ids are fragment ids, not file paths, so the suite's file-damaging checks are replaced by
``test_lance_errors.py``; Lance does its own I/O, so ``memory://`` is not claimed (``file://`` is).
Reads from spawned worker processes (each imports lance: seconds on a loaded machine) run in the
``slow`` class at the end.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from zephon_storage.testing.readers import CorpusConformance

from zephon_core.conformance.rules import ReaderCapabilities


class TestLanceConformance(CorpusConformance):
    dataset_format = "lance"

    def write(self, folder: Path, shards: list[list[dict]]) -> None:
        import lance
        import pyarrow as pa

        folder.rmdir()  # lance creates the dataset folder itself; one fragment per shard
        for k, rows in enumerate(shards):
            lance.write_dataset(pa.Table.from_pylist(rows), str(folder), mode="create" if k == 0 else "append")

    @pytest.fixture
    def reader_capabilities(self) -> ReaderCapabilities:
        return ReaderCapabilities(shard_files=False, memory_fs=False, processes=False)


class TestLanceConformanceWithDeletions(TestLanceConformance):
    """The same suite on a dataset with deleted rows: only the live rows, in order, are samples."""

    def write(self, folder: Path, shards: list[list[dict]]) -> None:
        import lance

        super().write(folder, shards)
        lance.dataset(str(folder)).delete("id % 7 = 3 OR id % 11 = 0")

    def shards(self) -> list[list[dict]]:
        return [[r for r in s if not (r["id"] % 7 == 3 or r["id"] % 11 == 0)] for s in super().shards()]


@pytest.mark.slow
class TestLanceConformanceInProcesses(TestLanceConformanceWithDeletions):
    """The suite on deleted rows again, with reads from spawned worker processes (a pickled reader)."""

    @pytest.fixture
    def reader_capabilities(self) -> ReaderCapabilities:
        return ReaderCapabilities(shard_files=False, memory_fs=False, processes=True)
