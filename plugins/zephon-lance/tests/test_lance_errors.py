"""Bad input: every fault is a ``ConfigError`` or a ``ReaderError`` that names the dataset (and fragment).

The kernel's conformance suite damages shard *files*; a Lance shard is a fragment, so the same
faults (a data file missing, truncated or overwritten with junk) are made here by hand on the
fragment's data file, as storage would.
"""

from __future__ import annotations

import re
import shutil
from datetime import timedelta
from pathlib import Path

import lance
import numpy as np
import pytest
from zephon_storage.testing.readers import fetch_pipeline, read_all, split

from zephon_core import ConfigError, Dataset, ReaderError, ZephonError
from zephon_core.testing.corpus import documents

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def dataset(tmp_path, write_lance) -> tuple[Path, list[list[dict]]]:
    shards = split(documents(limit=600), [200, 200])
    write_lance(tmp_path / "docs.lance", shards)
    return tmp_path / "docs.lance", shards


def data_file(root: Path, fragment: int) -> Path:
    (f,) = lance.dataset(str(root)).get_fragment(fragment).data_files()
    return root / "data" / f.path


def test_missing_path(tmp_path):
    missing = str(tmp_path / "nothing.lance")
    with pytest.raises(ReaderError, match=rf"{re.escape(missing)}: not a readable Lance dataset \(.*not found"):
        Dataset.from_path("x", missing, format="lance")
    with pytest.raises(ReaderError, match="does not exist"):
        Dataset.from_path("x", missing)


def test_folder_that_is_not_a_lance_dataset(tmp_path):
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "notes.txt").write_text("hello")
    with pytest.raises(ReaderError, match=rf"{re.escape(str(tmp_path / 'plain'))}: not a readable Lance dataset"):
        Dataset.from_path("x", str(tmp_path / "plain"), format="lance")


def test_corrupt_manifest(dataset):
    root, _ = dataset
    for manifest in (root / "_versions").glob("*.manifest"):
        manifest.write_bytes(b"not a manifest" * 10)
    with pytest.raises(ReaderError, match=rf"{re.escape(str(root))}: not a readable Lance dataset"):
        Dataset.from_path("x", str(root))


def test_missing_version(dataset):
    root, _ = dataset
    with pytest.raises(ReaderError, match=rf"{re.escape(str(root))}: Lance dataset has no version 9"):
        Dataset.from_path("x", str(root), version=9)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"colums": ["text"]},
            r"lance reader: unknown option\(s\) \['colums'\]; valid options: \['columns', 'storage_options', 'version'\]",
        ),
        ({"version": 0}, "versions start at 1"),
        ({"version": 1.5}, "version must be a version number or a tag name"),
        ({"version": True}, "version must be a version number or a tag name"),
        ({"columns": "text"}, "columns must be a list of names"),
        ({"storage_options": "x"}, "storage_options must be a dict"),
    ],
)
def test_bad_options(dataset, options, message):
    root, _ = dataset
    with pytest.raises(ConfigError, match=message):
        Dataset.from_path("x", str(root), format="lance", **options)


def test_missing_column(dataset):
    root, _ = dataset
    with pytest.raises(
        ReaderError,
        match=r"docs\.lance \(version 3\): has no column\(s\) \['title'\] \(columns: \['id', 'text', 'source'\]\)",
    ):
        Dataset.from_path("x", str(root), columns=["text", "title"])


def test_index_out_of_range(dataset):
    root, _ = dataset
    reader = Dataset.from_path("x", str(root)).reader
    with pytest.raises(ReaderError, match=r"fragment 1 \(data/.*\.lance\): row 200 out of range \(200 live rows\)"):
        reader.read(1, np.array([3, 200]))
    with pytest.raises(ReaderError, match=r"shard 3 does not exist \(3 fragments\)"):
        reader.read(3, np.array([0]))


@pytest.mark.parametrize("kind", ["missing", "truncated", "corrupt"])
def test_damaged_data_file(dataset, kind):
    root, shards = dataset
    victim = data_file(root, 1)
    data = victim.read_bytes()
    if kind == "missing":
        victim.unlink()
    elif kind == "truncated":
        victim.write_bytes(data[: len(data) // 2])
    else:  # junk over the middle, where the text column's bytes are
        mid, span = len(data) // 2, max(16, len(data) // 8)
        junk = np.random.default_rng(7).integers(0, 256, span, dtype=np.uint8).tobytes()
        victim.write_bytes(data[:mid] + junk + data[mid + span :])
    ds = Dataset.from_path("x", str(root))  # the manifest is intact: listing needs no data file
    assert ds.reader.read(0, np.arange(5)) == shards[0][:5]
    where = rf"{re.escape(str(root))} \(version 3\): fragment 1 \(data/{re.escape(victim.name)}\): cannot be read"
    with pytest.raises(ReaderError, match=where):
        ds.reader.read(1, np.arange(200))
    with pytest.raises(ZephonError, match=re.escape(victim.name)):
        for _ in fetch_pipeline([ds], parallelism=2):
            pass


def test_pinned_version_whose_files_were_cleaned_up(dataset, tmp_path):
    """Compaction + cleanup removes an old version's files: reading it is an error, not other rows."""
    root, shards = dataset
    pinned = Dataset.from_path("x", str(root), version=3)
    copy = tmp_path / "copy.lance"
    shutil.copytree(root, copy)
    lance.dataset(str(root)).optimize.compact_files(target_rows_per_fragment=10_000)
    lance.dataset(str(root)).cleanup_old_versions(older_than=timedelta(0), delete_unverified=True)
    now = Dataset.from_path("x", str(root))
    assert now.reader.version > 3 and len(now.shards) == 1 and read_all(now) == [r for s in shards for r in s]
    with pytest.raises(ReaderError, match=r"docs\.lance \(version 3\): fragment 0 \(data/.*\): cannot be read"):
        pinned.reader.read(0, np.arange(3))
    with pytest.raises(ReaderError, match="no version 3|not a readable Lance dataset"):
        Dataset.from_path("x", str(root), version=3)
    assert read_all(Dataset.from_path("x", str(copy), version=3)) == [r for s in shards for r in s]
