"""Bad input for zephon-vortex: every fault is a ReaderError naming the file, and nothing hangs."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import vortex as vx

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.corpus import documents  # noqa: E402
from tests.readerkit import pipeline  # noqa: E402
from zephon_core import Dataset, OperatorError, ReaderError, ZephonError  # noqa: E402

pytestmark = pytest.mark.timeout(60)
DOCS = documents(limit=3000)


@pytest.fixture(autouse=True)
def cache_env(tmp_path, monkeypatch):
    monkeypatch.setenv("ZEPHON_CACHE_DIR", str(tmp_path / "zephon-cache"))


@pytest.fixture
def one_file(tmp_path) -> Path:
    d = tmp_path / "data"
    d.mkdir()
    vx.io.write(vx.array(pa.Table.from_pylist(DOCS)), str(d / "part.vortex"))
    return d


def test_missing_path(tmp_path):
    with pytest.raises(ReaderError, match="does not exist"):
        Dataset.from_path("x", str(tmp_path / "nope"), format="vortex")


def test_file_deleted_after_listing(one_file):
    ds = Dataset.from_path("x", str(one_file))
    (one_file / "part.vortex").unlink()
    with pytest.raises(ReaderError, match=r"part\.vortex"):
        ds.reader.read(0, np.array([0]))


def test_truncated_file(one_file):
    path = one_file / "part.vortex"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(ReaderError, match=r"part\.vortex: not a readable Vortex file"):
        Dataset.from_path("x", str(one_file))


def test_corrupt_footer(one_file):
    path = one_file / "part.vortex"
    data = bytearray(path.read_bytes())
    for k in range(len(data) - 300, len(data) - 20, 7):
        data[k] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(ReaderError, match=r"part\.vortex: not a readable Vortex file"):
        Dataset.from_path("x", str(one_file))


def test_corrupt_data_segment(one_file):
    """Zeroed bytes in the middle of the data: decoding fails with an error naming the file."""
    path = one_file / "part.vortex"
    data = bytearray(path.read_bytes())
    mid = len(data) // 2
    data[mid : mid + 2000] = bytes(2000)
    path.write_bytes(bytes(data))
    ds = Dataset.from_path("x", str(one_file))
    with pytest.raises(ReaderError, match=r"part\.vortex: rows cannot be decoded"):
        ds.reader.read(0, np.arange(len(DOCS)))


def test_missing_column(one_file):
    with pytest.raises(ReaderError, match=r"part\.vortex: has no column\(s\) \['title'\]"):
        Dataset.from_path("x", str(one_file), columns=["title"])


def test_file_replaced_after_listing(one_file):
    ds = Dataset.from_path("x", str(one_file))
    vx.io.write(vx.array(pa.Table.from_pylist(DOCS[:10])), str(one_file / "part.vortex"))
    with pytest.raises(ReaderError, match=r"part\.vortex: has 10 rows but the dataset listed 3000"):
        ds.reader.read(0, np.array([5]))


def test_error_inside_a_pipeline_names_the_file(one_file):
    ds = Dataset.from_path("x", str(one_file))
    (one_file / "part.vortex").write_bytes(b"garbage")
    with pytest.raises(ZephonError, match=r"part\.vortex") as info:
        for _ in pipeline([ds], parallelism=2):
            pass
    assert isinstance(info.value, (ReaderError, OperatorError))


def test_unreadable_remote_object():
    pytest.importorskip("moto.server")
    from tests.s3server import moto_s3

    with moto_s3("vortex-bad") as s3:
        s3.put("d/bad.vortex", b"\0" * 1000)
        with pytest.raises(ReaderError, match=r"s3://vortex-bad/d/bad\.vortex: not a readable Vortex file"):
            Dataset.from_path("x", s3.url("d"), format="vortex", storage_options=s3.storage_options)
