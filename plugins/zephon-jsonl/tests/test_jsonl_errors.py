"""Bad input for zephon-jsonl: every fault is a ReaderError naming the file, and nothing hangs."""

from __future__ import annotations

import gzip
import json
import os
import pickle
from pathlib import Path

import numpy as np
import pytest
import zstandard
from zephon_storage.testing.readers import FileReaderFaults, zephon_index

from zephon_core import Dataset, ReaderError

pytestmark = pytest.mark.timeout(60)


def lines(records: list[dict]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


class TestJsonlFaults(FileReaderFaults):
    dataset_format = "jsonl"
    suffix = ".jsonl"
    samples = 300

    def write(self, path: Path, records: list[dict]) -> None:
        path.write_bytes(lines(records))

    def test_ambiguous_layout_asks_for_format(self, one_file: Path, docs: list[dict]) -> None:
        pytest.importorskip("zephon_parquet")
        (one_file / "extra.parquet").write_bytes(b"PAR1")
        with pytest.raises(ReaderError, match="several formats"):
            Dataset.from_path("x", str(one_file))
        assert Dataset.from_path("x", str(one_file), format="jsonl").num_samples == len(docs)

    def test_cut_at_a_line_boundary_with_its_index_is_caught_by_the_manifest(self, three_files: Path) -> None:
        """Whole lines cut off and the index deleted too: a well-formed, smaller file only the manifest catches."""
        zephon_index(three_files)
        p1 = three_files / "p1.jsonl"
        data = p1.read_bytes()
        p1.write_bytes(data[: data.index(b"\n", len(data) // 2) + 1])
        (three_files / "p1.jsonl.zidx").unlink()
        with pytest.raises(ReaderError, match=r"p1\.jsonl: has \d+ bytes, _zephon_manifest\.json says \d+"):
            Dataset.from_path("x", str(three_files))
        assert Dataset.from_path("x", str(three_files), manifest=False).num_samples < 300  # what it guards against

    def test_file_deleted_together_with_its_index(self, three_files: Path) -> None:
        zephon_index(three_files)
        (three_files / "p2.jsonl").unlink()
        (three_files / "p2.jsonl.zidx").unlink()
        with pytest.raises(ReaderError, match=r"p2\.jsonl: listed in _zephon_manifest\.json but missing"):
            Dataset.from_path("x", str(three_files))

    def test_record_count_is_held_to_the_manifest(self, three_files: Path) -> None:
        """Two lines joined into one (same size) and the index rebuilt on request: the count moved."""
        zephon_index(three_files)
        p0 = three_files / "p0.jsonl"
        data = p0.read_bytes()
        cut = data.index(b"\n")
        p0.write_bytes(data[:cut] + b" " + data[cut + 1 :])
        with pytest.raises(ReaderError, match=r"p0\.jsonl: has 99 samples, _zephon_manifest\.json says 100: the file changed"):
            Dataset.from_path("x", str(three_files), rebuild_stale=True)

    def test_truncated_before_indexing(self, one_file: Path) -> None:
        data = (one_file / "part.jsonl").read_bytes()
        (one_file / "part.jsonl").write_bytes(data[: len(data) - 37])  # cut inside the last record
        with pytest.raises(ReaderError, match=r"part\.jsonl.*truncated"):
            Dataset.from_path("x", str(one_file))

    def test_truncated_after_indexing_is_a_stale_index(self, one_file: Path) -> None:
        Dataset.from_path("x", str(one_file))
        data = (one_file / "part.jsonl").read_bytes()
        (one_file / "part.jsonl").write_bytes(data[:1000])
        with pytest.raises(ReaderError, match=r"part\.jsonl: index .* is stale"):
            Dataset.from_path("x", str(one_file))

    def test_truncated_while_open(self, one_file: Path) -> None:
        ds = Dataset.from_path("x", str(one_file))
        data = (one_file / "part.jsonl").read_bytes()
        (one_file / "part.jsonl").write_bytes(data[:1000])
        with pytest.raises(ReaderError, match=r"part\.jsonl: has 1000 bytes but its index was built for"):
            ds.reader.read(0, np.array([250]))

    def test_appended_file_is_stale_then_rebuilt_on_request(self, one_file: Path, docs: list[dict]) -> None:
        Dataset.from_path("x", str(one_file))
        with open(one_file / "part.jsonl", "ab") as f:
            f.write(lines(docs[:5]))
        with pytest.raises(ReaderError, match="stale"):
            Dataset.from_path("x", str(one_file))
        assert Dataset.from_path("x", str(one_file), rebuild_stale=True).num_samples == len(docs) + 5

    def test_index_disagreeing_with_data_same_size_and_mtime(self, one_file: Path, docs: list[dict]) -> None:
        """Bytes changed in place with size and mtime restored: the record checksum catches it."""
        path = one_file / "part.jsonl"
        ds = Dataset.from_path("x", str(one_file))
        st = os.stat(path)
        data = bytearray(path.read_bytes())
        start = data.index(b'"text": "', len(data) // 2) + 9
        data[start : start + 4] = b"XXXX"
        path.write_bytes(bytes(data))
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        rows = np.arange(len(docs))
        with pytest.raises(ReaderError, match=r"part\.jsonl: record \d+ .*checksum"):
            ds.reader.read(0, rows)
        with pytest.raises(ReaderError, match=r"part\.jsonl: record \d+ .*checksum"):
            Dataset.from_path("y", str(one_file)).reader.read(0, rows)  # the saved index is not trusted blindly

    def test_corrupt_json_line(self, one_file: Path) -> None:
        path = one_file / "part.jsonl"
        data = path.read_bytes().split(b"\n")
        data[10] = b'{"id": 10, "text": broken'
        path.write_bytes(b"\n".join(data))
        ds = Dataset.from_path("x", str(one_file))
        with pytest.raises(ReaderError, match=r"part\.jsonl: record 10 .*invalid JSON"):
            ds.reader.read(0, np.array([9, 10]))

    def test_not_an_object(self, one_file: Path) -> None:
        (one_file / "part.jsonl").write_bytes(b"[1, 2]\n")
        with pytest.raises(ReaderError, match="not an object"):
            Dataset.from_path("x", str(one_file)).reader.read(0, np.array([0]))

    def test_missing_field(self, one_file: Path) -> None:
        ds = Dataset.from_path("x", str(one_file), fields=["text", "title"])
        with pytest.raises(ReaderError, match=r"part\.jsonl: record 3 .*no field 'title'"):
            ds.reader.read(0, np.array([3]))

    def test_corrupt_and_truncated_compressed_files(self, tmp_path: Path, docs: list[dict]) -> None:
        good = lines(docs)
        cases = {
            "trunc.jsonl.gz": gzip.compress(good)[:-40],
            "trunc.jsonl.zst": zstandard.ZstdCompressor().compress(good)[:-40],
            "garbage.jsonl.gz": b"\x1f\x8b\x08\x00" + os.urandom(500),
            "garbage.jsonl.zst": b"\x28\xb5\x2f\xfd" + os.urandom(500),
        }
        for name, data in cases.items():
            d = tmp_path / name.replace(".", "_")
            d.mkdir()
            (d / name).write_bytes(data)
            with pytest.raises(ReaderError, match=name.replace(".", r"\.")):
                Dataset.from_path("x", str(d))

    def test_unreadable_remote_object(self, tmp_path: Path, docs: list[dict]) -> None:
        pytest.importorskip("moto.server")
        from zephon_testkit.s3 import moto_s3

        with moto_s3("jsonl-bad") as s3:
            s3.put("d/part.jsonl", lines(docs))
            cache = tmp_path / "node-cache"
            ds = Dataset.from_path(
                "x", s3.url("d"), storage_options=s3.storage_options, format="jsonl", cache_dir=str(cache)
            )
            s3.put("d/part.jsonl", lines(docs[:3]))  # replaced: new size and ETag
            worker = pickle.loads(pickle.dumps(ds.reader))  # as sent to a worker on a node without the copy
            for f in (cache / "shards").iterdir():
                f.unlink()
            with pytest.raises(ReaderError, match=r"s3://jsonl-bad/d/part\.jsonl: the object changed since"):
                worker.read(0, np.array([200]))
            s3.client.delete_object(Bucket=s3.bucket, Key="d/part.jsonl")
            with pytest.raises(ReaderError, match=r"s3://jsonl-bad/d/part\.jsonl: not found"):
                worker.read(0, np.array([200]))
            with pytest.raises(ReaderError, match=r"s3://jsonl-bad/d/missing\.jsonl' does not exist"):
                Dataset.from_path("y", s3.url("d/missing.jsonl"), storage_options=s3.storage_options, format="jsonl")

    def test_deleted_file_with_its_index_left_behind(self, tmp_path: Path, docs: list[dict]) -> None:
        d = tmp_path / "two"
        d.mkdir()
        (d / "a.jsonl").write_bytes(lines(docs[:50]))
        (d / "b.jsonl").write_bytes(lines(docs[50:]))
        Dataset.from_path("x", str(d))
        (d / "b.jsonl").unlink()
        with pytest.raises(ReaderError, match=r"b\.jsonl: missing, but its index b\.jsonl\.zidx is there"):
            Dataset.from_path("x", str(d))
