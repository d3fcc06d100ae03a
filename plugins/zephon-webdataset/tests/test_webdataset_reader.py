"""zephon-webdataset on tars written by ``webdataset.TarWriter``: keys, fields, decoding, indexes, pipelines."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from zephon_storage.testing.readers import check_fetch_runners, check_reader, run_cli, split
from zephon_webdataset.testing import as_sample, write_tar

from zephon_core import ConfigError, Dataset, ReaderError
from zephon_core.testing.corpus import documents

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def docs() -> list[dict]:
    return documents(limit=600)


@pytest.fixture
def three(tmp_path: Path, docs: list[dict]) -> tuple[Path, list[list[dict]]]:
    """600 documents in three tars (200 each) as WebDataset samples."""
    folder = tmp_path / "wds"
    shards = [[as_sample(d) for d in part] for part in split(docs, [200, 200, 200])]
    for k, part in enumerate(shards):
        write_tar(folder / f"train-{k:04d}.tar", part)
    (folder / "README.txt").write_text("not a shard")
    return folder, shards


def test_detects_reads_and_indexes_beside_the_tar(three):
    folder, shards = three
    ds = Dataset.from_path("x", str(folder))
    assert ds.format == "webdataset"
    assert [s.id for s in ds.shards] == ["train-0000.tar", "train-0001.tar", "train-0002.tar"]
    assert ds.reader.built_indexes == 3
    assert all((folder / f"train-{k:04d}.tar.zidx").exists() for k in range(3))
    assert check_reader(ds, shards) >= 600
    again = Dataset.from_path("y", str(folder))
    assert again.reader.built_indexes == 0  # reused
    os.utime(folder / "train-0001.tar", (1, 1))  # copied without -t: content unchanged
    moved = Dataset.from_path("z", str(folder))
    assert moved.reader.built_indexes == 0 and moved.reader.read(1, np.array([199]))[0] == shards[1][199]


def test_key_and_field_rules(tmp_path):
    """``dir/abc.seg.png`` is field ``seg.png`` of sample ``dir/abc``; extensions are lower-cased."""
    write_tar(
        tmp_path / "d" / "a.tar",
        [
            {"__key__": "img/abc", "jpg": b"\xff\xd8jpeg", "seg.png": b"\x89PNG", "TXT": "Hello", "cls": 3},
            {"__key__": "img/abd", "jpg": b"\xff\xd8other", "json": {"w": 2, "tags": ["a"]}},
        ],
    )
    ds = Dataset.from_path("x", str(tmp_path / "d"))
    a, b = ds.reader.read(0, np.array([0, 1]))
    assert a == {"__key__": "img/abc", "jpg": b"\xff\xd8jpeg", "seg.png": b"\x89PNG", "txt": "Hello", "cls": 3}
    assert b == {"__key__": "img/abd", "jpg": b"\xff\xd8other", "json": {"w": 2, "tags": ["a"]}}
    raw = Dataset.from_path("r", str(tmp_path / "d"), decode_text=())
    assert raw.reader.read(0, np.array([0]))[0]["cls"] == b"3"
    only = Dataset.from_path("o", str(tmp_path / "d"), fields=["jpg"])
    assert only.reader.read(0, np.array([1, 0])) == [
        {"__key__": "img/abd", "jpg": b"\xff\xd8other"},
        {"__key__": "img/abc", "jpg": b"\xff\xd8jpeg"},
    ]
    with pytest.raises(ReaderError, match=r"a\.tar: sample 1 \('img/abd'\) has no field 'cls'"):
        Dataset.from_path("c", str(tmp_path / "d"), fields=["cls"]).reader.read(0, np.array([1]))
    with pytest.raises(ConfigError, match="decode_text cannot decode 'png'"):
        Dataset.from_path("p", str(tmp_path / "d"), decode_text=["png"])


def test_brace_pattern_and_shard_names(three):
    folder, shards = three
    ds = Dataset.from_path("p", f"{folder}/train-{{0000..0001}}.tar", format="webdataset")
    assert [s.id for s in ds.shards] == ["train-0000.tar", "train-0001.tar"]
    assert check_reader(ds, shards[:2]) >= 400
    listed = Dataset.from_path("l", str(folder), shard_names=["train-0002.tar", "train-0000.tar"])
    assert [s.id for s in listed.shards] == ["train-0002.tar", "train-0000.tar"]
    assert listed.reader.read(0, np.array([5]))[0] == shards[2][5]
    with pytest.raises(ReaderError, match=r"train-0003\.tar: not found \(and 1 more\)"):
        Dataset.from_path("m", f"{folder}/train-{{0001..0004}}.tar", format="webdataset")
    with pytest.raises(ConfigError, match="not both"):
        Dataset.from_path("b", f"{folder}/train-{{0..1}}.tar", format="webdataset", shard_names=["x.tar"])


def test_non_contiguous_key_is_an_error(tmp_path):
    write_tar(
        tmp_path / "d" / "bad.tar",
        [{"__key__": "a", "txt": "one"}, {"__key__": "b", "txt": "two"}, {"__key__": "a", "jpg": b"late"}],
    )
    with pytest.raises(ReaderError, match=r"bad\.tar: the members of sample 'a' are not contiguous"):
        Dataset.from_path("x", str(tmp_path / "d"))


def test_same_field_twice_is_an_error(tmp_path):
    write_tar(tmp_path / "d" / "dup.tar", [{"__key__": "a", "txt": "one"}, {"__key__": "a", "txt": "two"}])
    with pytest.raises(ReaderError, match=r"dup\.tar: sample 'a' has field 'txt' twice"):
        Dataset.from_path("x", str(tmp_path / "d"))


def test_truncated_corrupt_and_not_a_tar(three):
    folder, _ = three
    t0, t1, t2 = (folder / f"train-{k:04d}.tar" for k in range(3))
    data = t0.read_bytes()
    t0.write_bytes(data[: len(data) // 2])
    with pytest.raises(ReaderError, match=r"train-0000\.tar: .*truncated"):
        Dataset.from_path("x", str(folder))
    t0.write_bytes(data)
    data1 = bytearray(t1.read_bytes())
    data1[512 * 40 : 512 * 40 + 512] = b"\x7f" * 512  # a header somewhere inside
    t1.write_bytes(bytes(data1))
    with pytest.raises(ReaderError, match=r"train-0001\.tar: "):
        Dataset.from_path("x", str(folder))
    t1.unlink()
    t2.write_bytes(b"this is not a tar file at all" * 40)
    with pytest.raises(ReaderError, match=r"train-0002\.tar: not a readable tar file"):
        Dataset.from_path("x", str(folder), format="webdataset")


def test_cut_at_a_member_boundary_is_truncated(tmp_path):
    """A tar cut exactly after a member (no end-of-archive block) would silently lose samples."""
    path = tmp_path / "d" / "cut.tar"
    write_tar(path, [{"__key__": f"k{i}", "txt": "x" * 100} for i in range(20)])
    data = path.read_bytes()
    path.write_bytes(data[: 1024 * 10])  # 10 whole members of 1024 bytes (header + padded payload)
    with pytest.raises(ReaderError, match=r"cut\.tar: ends at byte 10240 without the tar end-of-archive block"):
        Dataset.from_path("x", str(tmp_path / "d"))


def _corrupt_json_of(path: Path, key: str) -> None:
    """Overwrite sample ``key``'s JSON payload in place (same size and mtime), as bit rot would."""
    st = path.stat()
    data = bytearray(path.read_bytes())
    at = data.index(f"{key}.json".encode())
    start = data.index(b"{", at + 512)
    data[start : start + 3] = b"{{{"
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_on_error_skip_drops_a_corrupt_member(three):
    folder, shards = three
    Dataset.from_path("x", str(folder))  # indexes built before the damage
    _corrupt_json_of(folder / "train-0001.tar", shards[1][7]["__key__"])
    strict = Dataset.from_path("s", str(folder))
    with pytest.raises(ReaderError, match=r"train-0001\.tar: sample 7 \('docs/000207'\): field 'json' does not decode"):
        strict.reader.read(1, np.arange(200))
    ds = Dataset.from_path("k", str(folder), on_error="skip", max_bad_fraction=0.1)
    rows = ds.reader.read_or_skip(1, np.arange(200))
    assert rows[7] is None and [r for k, r in enumerate(rows) if k != 7] == shards[1][:7] + shards[1][8:]
    code, out, _ = run_cli("index", str(folder), "--validate", "--jobs", "1")
    assert code == 1 and "sample 7 ('docs/000207'): field 'json' does not decode" in out


def test_corrupt_member_header_is_a_record_error(three):
    """Index built, then a member header damaged in place: caught by the tar header checksum."""
    folder, shards = three
    Dataset.from_path("x", str(folder))
    path = folder / "train-0002.tar"
    st = path.stat()
    data = bytearray(path.read_bytes())
    at = data.index(f"{shards[2][3]['__key__']}.txt".encode())
    data[at] ^= 0x20
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    ds = Dataset.from_path("y", str(folder), on_error="skip")
    with pytest.raises(ReaderError, match=r"train-0002\.tar: sample 3 .*tar header of field 'txt'.*corrupt"):
        ds.reader.read(2, np.array([3]))
    rows = ds.reader.read_or_skip(2, np.arange(10))
    assert rows[3] is None and rows[4] == shards[2][4]


def test_stale_index_after_a_change(three, docs):
    folder, _ = three
    Dataset.from_path("x", str(folder))
    write_tar(folder / "train-0000.tar", [as_sample(d) for d in docs[:50]])
    with pytest.raises(ReaderError, match=r"train-0000\.tar: index .* is stale"):
        Dataset.from_path("x", str(folder))
    assert Dataset.from_path("x", str(folder), rebuild_stale=True).shards[0].num_samples == 50


def test_truncated_after_indexing(three):
    folder, _ = three
    ds = Dataset.from_path("x", str(folder))
    path = folder / "train-0001.tar"
    path.write_bytes(path.read_bytes()[:20_000])
    with pytest.raises(ReaderError, match=r"train-0001\.tar: has 20000 bytes but its index was built for"):
        ds.reader.read(1, np.array([150]))


def test_zephon_index_on_a_folder(three):
    folder, _ = three
    code, out, err = run_cli("index", str(folder))
    assert code == 0, out + err
    assert "webdataset: 3 tars, 600 samples; 3 index(es) built, 0 up to date" in out
    manifest = json.loads((folder / "_zephon_manifest.json").read_text())
    assert manifest["format"] == "webdataset"
    assert [(f["path"], f["samples"]) for f in manifest["files"]] == [(f"train-{k:04d}.tar", 200) for k in range(3)]
    code, out, _ = run_cli("index", str(folder), "--checksum")
    assert code == 0 and "0 index(es) built, 3 up to date" in out and "SHA-256" in out
    ds = Dataset.from_path("x", str(folder), verify="checksum")
    assert ds.num_samples == 600 and len(ds.reader.read(2, np.arange(5))) == 5
    sub = Dataset.from_path("s", f"{folder}/train-{{0001..0002}}.tar", format="webdataset")
    assert sub.num_samples == 400  # a selection is held to its own manifest entries


def test_pipeline_threads_and_processes(three):
    folder, shards = three
    ds = Dataset.from_path("w", str(folder), fields=["txt", "cls"])
    want = [[{"__key__": s["__key__"], "txt": s["txt"], "cls": s["cls"]} for s in part] for part in shards]
    assert check_fetch_runners([(ds, want)], fields=("__key__", "txt", "cls")) >= 500


def test_index_reads_headers_only(tmp_path, monkeypatch):
    """Indexing a shard of large members reads about one 64 KiB range per member, not the payloads."""
    import fsspec
    from zephon_storage.location import Storage

    path = tmp_path / "big.tar"
    write_tar(path, [{"__key__": f"img{i:03d}", "jpg": os.urandom(300_000), "txt": f"c{i}"} for i in range(20)])
    fs = fsspec.filesystem("memory")
    fs.pipe("/wds-big/big.tar", path.read_bytes())
    fetched = []
    real = Storage.read_range

    def counted(self, rel, start, end, info=None):
        data = real(self, rel, start, end, info)  # the real range read, only measured
        fetched.append(len(data))
        return data

    monkeypatch.setattr(Storage, "read_range", counted)
    try:
        ds = Dataset.from_path("m", "memory://wds-big")
        index_bytes = sum(fetched)
        row = ds.reader.read(0, np.array([13]))[0]
        sample_bytes = sum(fetched) - index_bytes
    finally:
        fs.rm("/wds-big", recursive=True)
    assert row["txt"] == "c13" and len(row["jpg"]) == 300_000
    assert index_bytes < 40 * 70_000 < path.stat().st_size // 2
    assert 300_000 < sample_bytes < 300_000 + 4096  # one ranged read: the sample's members and headers


def test_an_index_takes_its_tars_permission_bits(three):
    """Readers sharing a dataset can read its indexes: the index copies the tar's bits (not 0600)."""
    import stat

    folder, _ = three
    os.chmod(folder / "train-0000.tar", 0o644)
    os.chmod(folder / "train-0001.tar", 0o640)
    Dataset.from_path("x", str(folder))
    modes = [stat.S_IMODE(os.stat(folder / f"train-{k:04d}.tar.zidx").st_mode) for k in range(2)]
    assert modes == [0o644, 0o640]
