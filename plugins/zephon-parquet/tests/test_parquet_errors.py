"""Bad input for zephon-parquet: every fault is a ReaderError naming the file, and nothing hangs."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.corpus import documents  # noqa: E402
from tests.readerkit import pipeline  # noqa: E402
from zephon_core import Dataset, OperatorError, ReaderError, ZephonError  # noqa: E402

pytestmark = pytest.mark.timeout(60)
DOCS = documents(limit=2000)


@pytest.fixture(autouse=True)
def cache_env(tmp_path, monkeypatch):
    monkeypatch.setenv("ZEPHON_CACHE_DIR", str(tmp_path / "zephon-cache"))


@pytest.fixture
def one_file(tmp_path) -> Path:
    d = tmp_path / "data"
    d.mkdir()
    pq.write_table(pa.Table.from_pylist(DOCS), d / "part.parquet", row_group_size=500, write_page_checksum=True)
    return d


def test_missing_path_and_unknown_layout(tmp_path):
    with pytest.raises(ReaderError, match="does not exist"):
        Dataset.from_path("x", str(tmp_path / "nope"))
    (tmp_path / "x.csv").write_text("a,b")
    with pytest.raises(ReaderError, match=r"installed formats: .*parquet"):
        Dataset.from_path("x", str(tmp_path))


def test_file_deleted_after_listing(one_file):
    ds = Dataset.from_path("x", str(one_file))
    (one_file / "part.parquet").unlink()
    with pytest.raises(ReaderError, match=r"part\.parquet"):
        ds.reader.read(0, np.array([0]))


def test_truncated_file(one_file):
    path = one_file / "part.parquet"
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(ReaderError, match=r"part\.parquet: not a readable Parquet file"):
        Dataset.from_path("x", str(one_file))


def test_not_parquet_at_all(one_file):
    (one_file / "part.parquet").write_bytes(b"hello world, not parquet" * 10)
    with pytest.raises(ReaderError, match=r"part\.parquet: not a readable Parquet file"):
        Dataset.from_path("x", str(one_file))


def test_corrupt_page_is_detected(one_file):
    """Bytes flipped inside a data page: the page checksum (or the decoder) rejects the row group."""
    path = one_file / "part.parquet"
    meta = pq.read_metadata(path)
    col = meta.row_group(1).column(1)  # the text column of row group 1
    start = col.data_page_offset
    data = bytearray(path.read_bytes())
    for k in range(start + 40, start + 140):
        data[k] ^= 0x5A
    path.write_bytes(bytes(data))
    ds = Dataset.from_path("x", str(one_file))
    assert ds.reader.read(0, np.array([0]))[0] == DOCS[0]  # row group 0 is intact
    with pytest.raises(ReaderError, match=r"part\.parquet: row group 1 cannot be decoded"):
        ds.reader.read(0, np.array([600]))


def test_missing_column(one_file):
    with pytest.raises(ReaderError, match=r"part\.parquet: has no column\(s\) \['title'\]"):
        Dataset.from_path("x", str(one_file), columns=["text", "title"])


def test_file_replaced_after_listing(one_file):
    ds = Dataset.from_path("x", str(one_file))
    pq.write_table(pa.Table.from_pylist(DOCS), one_file / "part.parquet", row_group_size=300)
    with pytest.raises(ReaderError, match=r"part\.parquet: row groups .* disagree with the listing"):
        ds.reader.read(0, np.array([5]))


def test_error_inside_a_pipeline_names_the_file(one_file):
    ds = Dataset.from_path("x", str(one_file))
    (one_file / "part.parquet").write_bytes(b"garbage")
    with pytest.raises(ZephonError, match=r"part\.parquet") as info:
        for _ in pipeline([ds], parallelism=2):
            pass
    assert isinstance(info.value, (ReaderError, OperatorError))


def test_unreadable_remote_object(tmp_path):
    pytest.importorskip("moto.server")
    from tests.s3server import moto_s3

    with moto_s3("parquet-bad") as s3:
        s3.put("d/bad.parquet", b"PAR1" + b"\0" * 100)
        with pytest.raises(ReaderError, match=r"s3://parquet-bad/d/bad\.parquet: not a readable Parquet file"):
            Dataset.from_path("x", s3.url("d"), format="parquet", storage_options=s3.storage_options)
        buf = pa.BufferOutputStream()
        pq.write_table(pa.Table.from_pylist(DOCS[:100]), buf)
        s3.put("e/ok.parquet", buf.getvalue().to_pybytes())
        ds = Dataset.from_path("x", s3.url("e"), format="parquet", storage_options=s3.storage_options)
        s3.client.delete_object(Bucket=s3.bucket, Key="e/ok.parquet")
        with pytest.raises(ReaderError, match=r"s3://parquet-bad/e/ok\.parquet: not found"):
            ds.reader.read(0, np.array([1]))


def test_manifest_catches_missing_extra_and_changed_files(tmp_path):
    from zephon_parquet.index import build_index

    d = tmp_path / "m"
    d.mkdir()
    for k in range(3):
        pq.write_table(pa.Table.from_pylist(DOCS[k * 100 : (k + 1) * 100]), d / f"p{k}.parquet", row_group_size=40)
    assert "_zephon_manifest.json" in build_index(str(d))
    assert Dataset.from_path("x", str(d)).num_samples == 300
    (d / "p1.parquet").rename(tmp_path / "away.parquet")
    with pytest.raises(ReaderError, match=r"p1\.parquet: listed in _zephon_manifest\.json but missing"):
        Dataset.from_path("x", str(d))
    (tmp_path / "away.parquet").rename(d / "p1.parquet")
    pq.write_table(pa.Table.from_pylist(DOCS[:10]), d / "p3.parquet")
    with pytest.raises(ReaderError, match=r"p3\.parquet: not listed in _zephon_manifest\.json"):
        Dataset.from_path("x", str(d))
    (d / "p3.parquet").unlink()
    pq.write_table(pa.Table.from_pylist(DOCS[:50]), d / "p2.parquet")
    with pytest.raises(ReaderError, match=r"p2\.parquet: has \d+ bytes, _zephon_manifest\.json says"):
        Dataset.from_path("x", str(d))
    assert Dataset.from_path("x", str(d), manifest=False).num_samples == 250
