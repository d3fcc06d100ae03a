"""The kernel's reader conformance suite on WebDataset tars written by ``webdataset.TarWriter``."""

from __future__ import annotations

from pathlib import Path

import pytest
from zephon_storage.testing.readers import CorpusConformance
from zephon_webdataset.testing import as_sample, write_tar

pytestmark = pytest.mark.timeout(120)


class TestWebDatasetConformance(CorpusConformance):
    dataset_format = "webdataset"

    def write(self, folder: Path, shards: list[list[dict]]) -> None:
        for k, docs in enumerate(shards):
            write_tar(folder / f"shard-{k:04d}.tar", [as_sample(d) for d in docs])

    @pytest.fixture
    def expected_samples(self) -> list[list[dict]]:
        return [[as_sample(d) for d in docs] for docs in self.shards()]
