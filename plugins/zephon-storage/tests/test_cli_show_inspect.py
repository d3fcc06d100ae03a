"""``Dataset.head`` / ``ds[i]`` / ``take``, and ``zephon show`` / ``zephon inspect`` on every installed format.

Each format's data is written by its own library (json, pyarrow, vortex, ``datasets``); LitData and
MDS use the datasets their plugins commit, written by ``litdata.optimize`` and ``streaming.MDSWriter``
(neither library is a test dependency of the kernel).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from zephon_storage.cli_data import schema, summarize
from zephon_storage.testing.readers import read_all, run_cli, split

from zephon_core import Dataset
from zephon_core.testing.corpus import documents

ROOT = Path(__file__).resolve().parents[3]  # the repository: the fixtures are the LitData and MDS plugins'
FORMATS = ["jsonl", "parquet", "vortex", "hf", "litdata", "mds"]
SIZES = [7, 5, 9]


def _records() -> list[dict]:
    docs = documents(limit=sum(SIZES))
    return [{"id": i, "text": d["text"], "emb": [float(i), 0.5, -1.0]} for i, d in enumerate(docs)]


def _write(fmt: str, folder: Path) -> None:
    shards = split(_records(), SIZES)
    if fmt in ("litdata", "mds"):
        pytest.importorskip(f"zephon_{fmt}")
        src = "pytree" if fmt == "litdata" else "plain"
        shutil.copytree(ROOT / "plugins" / f"zephon-{fmt}" / "tests" / "fixtures" / "data" / src, folder)
        return
    pytest.importorskip(f"zephon_{fmt}")
    folder.mkdir(parents=True)
    if fmt == "jsonl":
        for k, recs in enumerate(shards):
            (folder / f"part-{k}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    elif fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        for k, recs in enumerate(shards):
            pq.write_table(pa.Table.from_pylist(recs), folder / f"part-{k}.parquet")
    elif fmt == "vortex":
        import pyarrow as pa
        import vortex as vx

        for k, recs in enumerate(shards):
            vx.io.write(vx.array(pa.Table.from_pylist(recs)), str(folder / f"part-{k}.vortex"))
    else:
        datasets = pytest.importorskip("datasets")
        datasets.disable_progress_bars()
        datasets.Dataset.from_list(_records()).save_to_disk(str(folder), num_shards=3)


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("looking")
    offline = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "HF_HOME": str(root / "hf-home")}
    old = {k: os.environ.get(k) for k in offline}
    os.environ.update(offline)
    try:
        for fmt in FORMATS:
            try:
                _write(fmt, root / fmt)
            except pytest.skip.Exception:
                continue
    finally:
        for k, v in old.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    return root


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZEPHON_CACHE_DIR", str(tmp_path / "cache"))


def _path(written: Path, fmt: str) -> Path:
    path = written / fmt
    if not path.exists():
        pytest.skip(f"zephon-{fmt} (or its writer) is not installed")
    return path


# -- Dataset.head / [] / take ---------------------------------------------------------------------
def test_indexing_a_memory_dataset_maps_global_indices_to_shards() -> None:
    recs = [{"i": i} for i in range(23)]
    ds = Dataset.from_records("mem", recs, shard_size=5)
    assert len(ds) == 23
    assert ds.head() == recs[:5] and ds.head(100) == recs and ds.head(0) == []
    assert [ds[i]["i"] for i in range(23)] == list(range(23))
    assert ds[-1] == {"i": 22} and ds[-23] == {"i": 0}
    assert ds.locate(12) == (2, 2) and ds.locate(-1) == (4, 2)
    assert ds.take([22, 0, 7, 7, -2]) == [{"i": 22}, {"i": 0}, {"i": 7}, {"i": 7}, {"i": 21}]
    with pytest.raises(IndexError, match=r"dataset 'mem': index 23 out of range \(length 23\)"):
        ds[23]
    with pytest.raises(IndexError, match=r"'mem': index -24 out of range \(length 23\)"):
        ds.take([1, -24])
    with pytest.raises(TypeError):
        ds["0"]  # type: ignore[index]


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_indexing_reads_through_the_format_reader(written: Path, fmt: str) -> None:
    ds = Dataset.from_path("d", str(_path(written, fmt)))
    everything = read_all(ds)
    assert ds.head(3) == everything[:3]
    assert ds[SIZES[0]] == everything[SIZES[0]] == _records()[SIZES[0]]  # the first record of shard 1
    assert ds[-1] == everything[-1]
    order = [20, 0, 13, 7, 20]
    assert ds.take(order) == [everything[i] for i in order]


# -- value summaries --------------------------------------------------------------------------------
def test_summaries_cut_long_values() -> None:
    long = "x" * 500
    assert summarize(long) == repr("x" * 79 + "…") + " (500 chars)"
    assert summarize("short") == "'short'"
    assert summarize(b"\0" * 1234) == "<1234 bytes>"
    text = summarize(np.arange(12, dtype=np.int32).reshape(3, 4))
    assert text == "array int32[3x4] [0, 1, 2, 3, 4, …]"
    assert summarize(np.float32(0.1)) == "float32 0.1"
    assert summarize(list(range(100))).endswith("… (100 items)]")
    assert len(summarize({"k": long, "j": [long] * 10})) <= 160


def test_schema_merges_shapes_and_types() -> None:
    samples = [
        {"tok": np.zeros(3, np.int32), "img": np.zeros((2, 2), np.uint8), "t": "a", "x": 1},
        {"tok": np.zeros(5, np.int32), "img": np.zeros((2, 2), np.uint8), "t": "b", "x": None},
    ]
    assert schema(samples) == {"tok": "int32[?]", "img": "uint8[2x2]", "t": "str", "x": "int | None"}


# -- zephon show / inspect --------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", FORMATS)
def test_show_prints_samples_and_schema(written: Path, fmt: str) -> None:
    path = _path(written, fmt)
    code, out, err = run_cli("show", str(path), "-n", "3")
    assert code == 0, err
    ds = Dataset.from_path("d", str(path))
    assert out.splitlines()[0] == f"{path}: format {fmt}, {len(ds.shards)} shard(s), {ds.num_samples} sample(s)"
    assert out.count("\nsample ") == 3
    assert "schema (from 3 sample(s)):" in out
    first = ds[0]
    for key in first:
        assert f"\n  {key}" in out
    assert max(len(line) for line in out.splitlines()) < 220  # long texts are cut
    if "text" in first:
        assert "text" in schema([first]) and schema([first])["text"] == "str"


@pytest.mark.parametrize("fmt", FORMATS)
def test_inspect_lists_shards_with_sizes(written: Path, fmt: str) -> None:
    path = _path(written, fmt)
    code, out, err = run_cli("inspect", str(path), "--json")
    assert code == 0, err
    doc = json.loads(out)
    ds = Dataset.from_path("d", str(path))
    assert doc["format"] == fmt and doc["package"] == f"zephon-{fmt}"
    assert [(s["id"], s["samples"]) for s in doc["shards"]] == [(s.id, s.num_samples) for s in ds.shards]
    assert [s["bytes"] for s in doc["shards"]] == [(path / s.id).stat().st_size for s in ds.shards]
    assert doc["samples"] == ds.num_samples and doc["bytes"] == sum(s["bytes"] for s in doc["shards"])
    code, table, _ = run_cli("inspect", str(path))
    assert code == 0
    assert f"format:  {fmt} (zephon-{fmt} " in table
    assert table.splitlines()[-1].split() == ["total", str(ds.num_samples), str(doc["bytes"])]


def test_show_and_inspect_with_a_named_format(written: Path) -> None:
    path = _path(written, "jsonl") / "part-1.jsonl"
    code, out, _ = run_cli("show", str(path), "-n", "1", "--format", "jsonl")
    assert code == 0 and "1 shard(s), 5 sample(s)" in out
    code, out, _ = run_cli("inspect", str(path), "--format", "jsonl")
    assert code == 0 and "shards:  1" in out


@pytest.mark.parametrize("command", ["show", "inspect"])
def test_errors_are_one_line_and_exit_status_2(written: Path, tmp_path: Path, command: str) -> None:
    cases = [
        ([str(tmp_path / "missing")], "does not exist"),
        ([str(_path(written, "jsonl")), "--format", "nosuchformat"], "no reader named 'nosuchformat'"),
    ]
    (tmp_path / "odd").mkdir()
    (tmp_path / "odd" / "notes.txt").write_text("hello\n")
    cases.append(([str(tmp_path / "odd")], "no installed format recognises"))
    for argv, words in cases:
        code, out, err = run_cli(command, *argv)
        assert code == 2, (argv, out, err)
        assert out == "" and err.count("\n") == 1 and err.startswith("zephon: error: ") and words in err, err
        assert "Traceback" not in err


# -- looking leaves the data as it was ----------------------------------------------------------------
def _listing(folder: Path) -> dict[str, int]:
    """Every name under ``folder`` (and the folder itself) with its mtime in ns: what a write would change."""
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in [folder, *sorted(folder.rglob("*"))]}


def _indexed_data(fmt: str, folder: Path) -> list[Path]:
    """Two files of ``fmt`` (a format that keeps an index per data file), written by its own library."""
    recs = _records()[:10]
    if fmt == "jsonl":
        pytest.importorskip("zephon_jsonl")
        folder.mkdir()
        files = [folder / f"part-{k}.jsonl" for k in range(2)]
        for k, f in enumerate(files):
            f.write_text("".join(json.dumps(r) + "\n" for r in recs[k * 5 : k * 5 + 5]))
        return files
    pytest.importorskip("zephon_webdataset")
    from zephon_webdataset.testing import as_sample, write_tar

    files = [folder / f"shard-{k:03d}.tar" for k in range(2)]
    for k, f in enumerate(files):
        write_tar(f, [as_sample({**r, "source": "test"}) for r in recs[k * 5 : k * 5 + 5]])
    return files


@pytest.mark.parametrize("fmt", ["jsonl", "webdataset"])
def test_show_and_inspect_write_nothing_beside_the_data(tmp_path: Path, fmt: str) -> None:
    """The index these formats need is built in the cache directory, not in the data folder."""
    folder = tmp_path / fmt
    _indexed_data(fmt, folder)
    before = _listing(folder)
    for argv in (["show", str(folder), "-n", "2"], ["inspect", str(folder)], ["inspect", str(folder), "--json"]):
        code, _, err = run_cli(*argv)
        assert code == 0, err
        assert _listing(folder) == before, f"zephon {' '.join(argv)} changed the data folder"
    assert len(list((tmp_path / "cache" / "index").iterdir())) == 2  # where the indexes went instead


@pytest.mark.parametrize("fmt", ["jsonl", "webdataset"])
def test_show_and_inspect_use_an_index_beside_the_data_without_rewriting_it(tmp_path: Path, fmt: str) -> None:
    """A data file copied with a new mtime still fits its index (same content); looking does not record that."""
    folder = tmp_path / fmt
    files = _indexed_data(fmt, folder)
    code, _, err = run_cli("index", str(folder))
    assert code == 0, err
    st = files[0].stat()
    os.utime(files[0], ns=(st.st_atime_ns, st.st_mtime_ns - 10**9))  # what `cp` without -p leaves
    before = _listing(folder)
    for argv in (["show", str(folder), "-n", "1"], ["inspect", str(folder)]):
        code, _, err = run_cli(*argv)
        assert code == 0, err
        assert _listing(folder) == before, f"zephon {' '.join(argv)} changed the data folder"
    assert not (tmp_path / "cache" / "index").exists()  # the indexes beside the data were used
