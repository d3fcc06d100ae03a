"""Bad input for zephon-webdataset: the shared file-per-shard faults (manifest, checksums, validation)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from zephon_storage.testing.readers import FileReaderFaults, zephon_index
from zephon_webdataset.testing import write_tar

from zephon_core import Dataset, ReaderError

pytestmark = pytest.mark.timeout(120)


class TestWebDatasetFaults(FileReaderFaults):
    dataset_format = "webdataset"
    suffix = ".tar"
    samples = 300

    def write(self, path: Path, records: list[dict]) -> None:
        write_tar(path, [{"__key__": f"{r['id']:06d}", "text": r["text"], "id": r["id"]} for r in records])

    def test_tar_deleted_together_with_its_index(self, three_files: Path) -> None:
        zephon_index(three_files)
        (three_files / "p2.tar").unlink()
        (three_files / "p2.tar.zidx").unlink()
        with pytest.raises(ReaderError, match=r"p2\.tar: listed in _zephon_manifest\.json but missing"):
            Dataset.from_path("x", str(three_files))

    def test_deleted_tar_with_its_index_left_behind(self, three_files: Path) -> None:
        Dataset.from_path("x", str(three_files))
        (three_files / "p1.tar").unlink()
        with pytest.raises(ReaderError, match=r"p1\.tar: missing, but its index p1\.tar\.zidx is there"):
            Dataset.from_path("x", str(three_files))

    def test_out_of_range_index(self, one_file: Path) -> None:
        ds = Dataset.from_path("x", str(one_file))
        with pytest.raises(ReaderError, match=r"part\.tar: sample index 300 out of range \(tar has 300 samples\)"):
            ds.reader.read(0, np.array([0, 300]))
