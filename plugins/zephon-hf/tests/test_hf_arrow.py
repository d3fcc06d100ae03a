"""``save_to_disk`` folders written by ``datasets``: rows equal ``load_from_disk``'s, splits, errors, index."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from zephon_storage.testing.readers import check_fetch_runners, check_reader, read_all, unknown_option_message

from zephon_core import ConfigError, Dataset, ReaderError, RecordError

pytestmark = pytest.mark.timeout(120)


def shards_of(path: Path, rows: list[dict]) -> list[list[dict]]:
    """``rows`` cut like the saved files (``state.json`` order, each file's row count from pyarrow)."""
    import pyarrow as pa

    state = json.loads((path / "state.json").read_text())
    out, start = [], 0
    for entry in state["_data_files"]:
        n = pa.ipc.open_stream(pa.memory_map(str(path / entry["filename"]))).read_all().num_rows
        out.append(rows[start : start + n])
        start += n
    assert start == len(rows)
    return out


@pytest.fixture(scope="module")
def saved(hf, rows, tmp_path_factory) -> Path:
    """The nested rows saved by ``Dataset.save_to_disk`` in three Arrow files."""
    path = tmp_path_factory.mktemp("arrow") / "saved"
    hf.Dataset.from_list(rows).save_to_disk(str(path), num_shards=3)
    return path


@pytest.fixture(scope="module")
def dataset_dict(hf, rows, tmp_path_factory) -> Path:
    """A ``DatasetDict`` with a train (500 rows, 2 files) and a test split (100 rows), saved by ``datasets``."""
    path = tmp_path_factory.mktemp("arrow") / "dd"
    dd = hf.DatasetDict({"train": hf.Dataset.from_list(rows[:500]), "test": hf.Dataset.from_list(rows[500:])})
    dd.save_to_disk(str(path), num_shards={"train": 2, "test": 1})
    return path


def test_rows_equal_load_from_disk(hf, saved, rows):
    ds = Dataset.from_path("docs", str(saved))  # detected: state.json
    assert ds.format == "hf" and ds.num_samples == 600
    assert [s.id for s in ds.shards] == [f"data-0000{k}-of-00003.arrow" for k in range(3)]
    expected = hf.load_from_disk(str(saved)).to_list()
    assert expected == rows
    assert read_all(ds) == expected  # strings, lists of ints and strings, structs
    assert check_reader(ds, shards_of(saved, rows)) > 600
    assert ds.reader.describe() == {
        "format": "hf",
        "layout": "save_to_disk",
        "config": None,
        "split": None,
        "columns": None,
    }
    assert "datasets" not in type(ds.reader).__module__


def test_dataset_dict_splits(dataset_dict, rows):
    train = Dataset.from_path("train", str(dataset_dict), split="train")
    test = Dataset.from_path("test", str(dataset_dict), split="test")
    assert [s.id for s in train.shards] == ["train/data-00000-of-00002.arrow", "train/data-00001-of-00002.arrow"]
    assert read_all(train) == rows[:500] and read_all(test) == rows[500:]
    assert Dataset.from_path("t", str(dataset_dict / "test")).num_samples == 100  # a split folder alone
    with pytest.raises(ConfigError, match=r"has splits \['train', 'test'\]; pass split= to choose one"):
        Dataset.from_path("x", str(dataset_dict))
    with pytest.raises(ConfigError, match=r"has no split 'validation'; valid splits: \['train', 'test'\]"):
        Dataset.from_path("x", str(dataset_dict), split="validation")
    with pytest.raises(ConfigError, match=r"which has no configs \(drop config=\)"):
        Dataset.from_path("x", str(dataset_dict), split="train", config="default")
    with pytest.raises(ConfigError, match=unknown_option_message("hf", "splits")):
        Dataset.from_path("x", str(dataset_dict), splits="train")
    with pytest.raises(ConfigError, match=r"split must be a non-empty string"):
        Dataset.from_path("x", str(dataset_dict), split=["train"])


def test_columns_and_a_single_arrow_file(saved, rows):
    ds = Dataset.from_path("x", str(saved), columns=["meta", "text"])
    assert ds.reader.read(2, np.array([5, 0])) == [
        {"meta": r["meta"], "text": r["text"]} for r in (rows[405], rows[400])
    ]
    with pytest.raises(ReaderError, match=r"data-00000-of-00003\.arrow: has no column\(s\) \['title'\]"):
        Dataset.from_path("x", str(saved), columns=["text", "title"])
    one = Dataset.from_path("x", str(saved / "data-00001-of-00003.arrow"), format="hf")
    assert read_all(one) == rows[200:400]


def test_builder_cache_from_load_dataset(hf, rows, tmp_path):
    """``load_dataset`` leaves ``dataset_info.json`` beside ``<name>-<split>.arrow``: readable as is."""
    src = tmp_path / "src"
    (src / "data").mkdir(parents=True)
    hf.Dataset.from_list(rows[:50]).to_parquet(str(src / "data" / "train-00000-of-00001.parquet"))
    hf.Dataset.from_list(rows[50:70]).to_parquet(str(src / "data" / "test-00000-of-00001.parquet"))
    cache = tmp_path / "cache"
    loaded = hf.load_dataset(str(src), cache_dir=str(cache))
    folder = Path(loaded["train"].cache_files[0]["filename"]).parent
    ds = Dataset.from_path("x", str(folder), split="test")
    assert ds.reader.describe()["layout"] == "cache"
    assert read_all(ds) == loaded["test"].to_list() == rows[50:70]


@pytest.mark.slow  # spawns worker processes; the conformance suite already reads from spawned processes
def test_pipeline_threads_and_processes(hf, tmp_path):
    """A fetch + batch pipeline in threads, then in worker processes: every row right, the same batches."""
    from zephon_storage.testing.readers import split

    from zephon_core.testing.corpus import documents

    docs = documents(limit=3000)
    hf.Dataset.from_list(docs).save_to_disk(str(tmp_path / "a"), num_shards=4)
    ds = Dataset.from_path("a", str(tmp_path / "a"))
    assert check_fetch_runners([(ds, split(docs, [750, 750, 750]))]) >= 2900


def test_missing_truncated_and_corrupt_files(saved, rows, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(saved, copy)
    victim = copy / "data-00001-of-00003.arrow"
    data = victim.read_bytes()
    victim.unlink()
    with pytest.raises(ReaderError, match=r"copy/data-00001-of-00003\.arrow: listed in state\.json but missing"):
        Dataset.from_path("x", str(copy))
    victim.write_bytes(data[:-8])  # cut at a message boundary: a valid but shorter stream, without its end
    with pytest.raises(
        ReaderError, match=r"data-00001-of-00003\.arrow: not a readable Arrow stream file: it does not end"
    ):
        Dataset.from_path("x", str(copy))
    victim.write_bytes(data[: len(data) // 2])
    with pytest.raises(ReaderError, match=r"data-00001-of-00003\.arrow: not a readable Arrow stream file"):
        Dataset.from_path("x", str(copy))
    (copy / "state.json").write_text("{not json")
    with pytest.raises(ReaderError, match=r"copy/state\.json: not valid JSON"):
        Dataset.from_path("x", str(copy), format="hf")


def test_corrupt_offsets_are_a_record_error_and_skippable(saved, rows, tmp_path):
    """Garbage in a string column's offsets: the batch fails validation instead of crashing pyarrow."""
    import pyarrow as pa

    copy = tmp_path / "copy"
    shutil.copytree(saved, copy)
    path = copy / "data-00000-of-00003.arrow"
    batch = pa.ipc.open_stream(pa.memory_map(str(path))).read_next_batch()
    offsets = batch.column("text").buffers()[1]
    data = bytearray(path.read_bytes())
    start = data.find(offsets.to_pybytes()[8:64])
    assert start > 0
    data[start : start + 16] = b"\xff" * 16  # offsets 2..5 now point far outside the data
    path.write_bytes(bytes(data))
    ds = Dataset.from_path("x", str(copy))
    with pytest.raises(RecordError, match=r"data-00000-of-00003\.arrow: record batch 0 \(rows 0-199\) is corrupt"):
        ds.reader.read(0, np.array([3]))
    assert ds.reader.read(1, np.array([0])) == [rows[200]]  # other files are fine
    skip = Dataset.from_path("x", str(copy), on_error="skip", max_bad_fraction=0.5)
    assert skip.reader.read_or_skip(0, np.array([3, 4])) == [None, None]
    assert skip.reader.read_or_skip(1, np.array([1])) == [rows[201]]


def test_file_replaced_after_listing(hf, saved, rows, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(saved, copy)
    ds = Dataset.from_path("x", str(copy))
    hf.Dataset.from_list(rows[:10]).save_to_disk(str(tmp_path / "other"))
    shutil.copy(tmp_path / "other" / "data-00000-of-00001.arrow", copy / "data-00002-of-00003.arrow")
    with pytest.raises(ReaderError, match=r"data-00002-of-00003\.arrow: has \d+ bytes, \d+ when listed"):
        ds.reader.read(2, np.array([0]))


def test_index_covers_every_split(dataset_dict, rows, tmp_path, capsys, monkeypatch):
    from zephon_hf.arrow import ArrowReader

    from zephon_core.cli import main

    copy = tmp_path / "dd"
    shutil.copytree(dataset_dict, copy)
    assert main(["index", str(copy)]) == 0
    out = capsys.readouterr().out
    assert "hf: 3 files, rows per split: train 500, test 100" in out and "_zephon_manifest.json" in out
    manifest = json.loads((copy / "_zephon_manifest.json").read_text())
    assert [f["path"] for f in manifest["files"]] == [
        "test/data-00000-of-00001.arrow",
        "train/data-00000-of-00002.arrow",
        "train/data-00001-of-00002.arrow",
    ]

    def no_reads(self, i):
        raise AssertionError("listing with a manifest must not open data files")

    with monkeypatch.context() as m:
        m.setattr(ArrowReader, "_map", no_reads)
        assert Dataset.from_path("x", str(copy), split="train").num_samples == 500
    assert read_all(Dataset.from_path("x", str(copy), split="test")) == rows[500:]
    (copy / "train" / "data-00001-of-00002.arrow").unlink()
    with pytest.raises(ReaderError, match=r"train/data-00001-of-00002\.arrow: listed in train/state\.json but missing"):
        Dataset.from_path("x", str(copy), split="train")
    assert Dataset.from_path("x", str(copy), split="test").num_samples == 100  # the other split is intact


def test_checksums_catch_a_flipped_number(hf, tmp_path):
    """Arrow data has no checksums: ``zephon index --checksum`` + ``verify="checksum"`` find a changed int."""
    from zephon_core.cli import main

    path = tmp_path / "ints"
    hf.Dataset.from_dict({"n": list(range(1000))}).save_to_disk(str(path))
    assert main(["index", str(path), "--checksum"]) == 0
    arrow = path / "data-00000-of-00001.arrow"
    data = bytearray(arrow.read_bytes())
    at = data.find(np.arange(500, 502, dtype=np.int64).tobytes())
    data[at] ^= 0x01  # 500 -> 501: still valid Arrow
    arrow.write_bytes(bytes(data))
    assert Dataset.from_path("x", str(path)).reader.read(0, np.array([500])) == [{"n": 501}]  # undetectable alone
    with pytest.raises(ReaderError, match=r"data-00000-of-00001\.arrow: content checksum mismatch"):
        Dataset.from_path("x", str(path), verify="checksum").reader.read(0, np.array([500]))
