"""zephon-vortex against real files written by vortex's own writer."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import vortex as vx
from zephon_storage.testing.readers import check_fetch_runners, check_reader, split

from zephon_core import Dataset
from zephon_core.testing.corpus import documents

pytestmark = pytest.mark.timeout(120)


def write_vortex(path: Path, records: list[dict]) -> None:
    vx.io.write(vx.array(pa.Table.from_pylist(records)), str(path))


@pytest.fixture(scope="module")
def docs() -> list[dict]:
    return documents()[:12_000]


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory, docs):
    root = tmp_path_factory.mktemp("vortex")
    shards = split(docs, [5000, 4000])
    write_vortex(root / "a.vortex", shards[0])
    write_vortex(root / "b.vortex", shards[1])
    write_vortex(root / "c.vortex", shards[2])
    return root, shards


@pytest.fixture(autouse=True)
def cache_env(tmp_path, monkeypatch):
    monkeypatch.setenv("ZEPHON_CACHE_DIR", str(tmp_path / "zephon-cache"))


def test_detects_and_reads_every_sample(corpus_dir):
    root, shards = corpus_dir
    ds = Dataset.from_path("docs", str(root))
    assert ds.format == "vortex"
    assert [s.id for s in ds.shards] == ["a.vortex", "b.vortex", "c.vortex"]
    assert check_reader(ds, shards) > 12_000


def test_one_take_per_call_returns_request_order(corpus_dir):
    root, shards = corpus_dir
    reader = Dataset.from_path("docs", str(root / "b.vortex")).reader
    idx = np.array([3999, 0, 17, 17, 2500, 0])
    assert reader.read(0, idx) == [shards[1][i] for i in idx.tolist()]


def test_columns_option(corpus_dir):
    root, shards = corpus_dir
    ds = Dataset.from_path("docs", str(root), columns=["id", "source"])
    assert ds.reader.read(2, np.array([1])) == [{"id": shards[2][1]["id"], "source": shards[2][1]["source"]}]


@pytest.mark.slow
def test_pipeline_threads_and_processes(corpus_dir):
    root, shards = corpus_dir
    a = Dataset.from_path("a", str(root / "a.vortex"))
    b = Dataset.from_path("b", str(root))
    assert check_fetch_runners([(a, [shards[0]]), (b, shards)]) >= 9900  # same batches from threads and processes


def test_cli_index(corpus_dir, capsys):
    from zephon_core.cli import main

    root, _ = corpus_dir
    assert main(["index", str(root)]) == 0
    assert "vortex: 3 files, 12000 rows" in capsys.readouterr().out


def test_s3_dataset(corpus_dir):
    pytest.importorskip("moto.server")
    from zephon_testkit.s3 import moto_s3

    root, shards = corpus_dir
    with moto_s3("vortex-tests") as s3:
        s3.upload_dir(str(root), "corpus")
        ds = Dataset.from_path("s3", s3.url("corpus"), format="vortex", storage_options=s3.storage_options, prefetch=1)
        assert check_reader(ds, shards) > 12_000
