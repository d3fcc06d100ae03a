"""zephon-lance against real datasets written by ``lance.write_dataset``: versions, deletions, columns, take."""

from __future__ import annotations

import pickle

import lance
import numpy as np
import pyarrow as pa
import pytest
from zephon_storage.testing.readers import check_fetch_runners, check_reader, read_all, split

from zephon_core import CheckpointError, Dataset, MixtureSpec, Pipeline, StaticMixtureWorkSource
from zephon_core.testing.corpus import documents

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def docs() -> list[dict]:
    return documents()[:3000]


@pytest.fixture
def corpus(tmp_path, docs, write_lance):
    shards = split(docs, [1200, 1000])
    write_lance(tmp_path / "docs.lance", shards)
    return tmp_path / "docs.lance", shards


def test_detects_and_reads_every_sample(corpus):
    root, shards = corpus
    ds = Dataset.from_path("docs", str(root))
    assert ds.format == "lance"
    assert [s.id for s in ds.shards] == ["fragment-0", "fragment-1", "fragment-2"]
    assert check_reader(ds, shards) > 3000


def test_fragments_of_one_write(tmp_path, docs):
    lance.write_dataset(pa.Table.from_pylist(docs[:1000]), str(tmp_path / "d"), max_rows_per_file=300)
    ds = Dataset.from_path("d", str(tmp_path / "d"))
    assert [s.num_samples for s in ds.shards] == [300, 300, 300, 100]
    assert read_all(ds) == docs[:1000]


def test_one_take_per_call_returns_request_order(corpus):
    root, shards = corpus
    reader = Dataset.from_path("docs", str(root)).reader
    idx = np.array([999, 0, 17, 17, 500, 0])
    got = reader.read(1, idx)
    assert got == [shards[1][i] for i in idx.tolist()]
    got[2]["text"] = "changed"  # repeats are separate dicts
    assert got[3]["text"] == shards[1][17]["text"]
    assert reader.read(1, np.array([], dtype=np.int64)) == []


def test_random_access_with_take(corpus, docs):
    root, _ = corpus
    ds = Dataset.from_path("docs", str(root))
    idx = [2999, 0, 1200, 1199, 2200, -1, 1200]
    assert ds.take(idx) == [docs[i] for i in idx]
    assert ds[1500] == docs[1500] and ds.head(2) == docs[:2]


def test_columns_option_in_the_order_asked(corpus):
    root, shards = corpus
    ds = Dataset.from_path("docs", str(root), columns=["source", "id"])
    (row,) = ds.reader.read(2, np.array([1]))
    assert list(row) == ["source", "id"] and row == {"source": shards[2][1]["source"], "id": shards[2][1]["id"]}
    assert ds.reader.describe()["columns"] == ["source", "id"]


def test_version_pinned_at_open_time(corpus, docs):
    root, shards = corpus
    before = Dataset.from_path("docs", str(root))
    assert before.reader.version == 3  # three commits: create + two appends
    lance.write_dataset(pa.Table.from_pylist(docs[:10]), str(root), mode="append")
    lance.dataset(str(root)).delete("id < 100")
    # the reader opened earlier still reads version 3, in this process and after pickling
    assert before.reader.shards() == Dataset.from_path("d", str(root), version=3).shards
    clone = pickle.loads(pickle.dumps(before.reader))
    assert clone.version == 3 and clone.read(0, np.arange(5)) == shards[0][:5]
    assert check_reader(before, shards) > 3000
    now = Dataset.from_path("docs", str(root))
    assert now.reader.version == 5 and now.num_samples == 3000 + 10 - 100 - sum(d["id"] < 100 for d in docs[:10])
    assert [s.num_samples for s in Dataset.from_path("d", str(root), version=1).shards] == [1200]


def test_version_by_tag(corpus, docs):
    root, shards = corpus
    lance.dataset(str(root)).tags.create("v-first", 1)
    lance.write_dataset(pa.Table.from_pylist(docs[:10]), str(root), mode="append")
    ds = Dataset.from_path("docs", str(root), version="v-first")
    assert ds.reader.version == 1 and ds.reader.describe()["version"] == 1
    assert read_all(ds) == shards[0]


def test_deleted_rows_are_never_returned(tmp_path, docs, write_lance):
    root = tmp_path / "del.lance"
    write_lance(root, split(docs[:900], [300, 300]))
    lance.dataset(str(root)).delete("id % 5 = 0 OR (id >= 600 AND id < 900)")  # the last fragment entirely
    ds = Dataset.from_path("d", str(root))
    live = [[d for d in docs[k * 300 : (k + 1) * 300] if d["id"] % 5] for k in range(2)]
    # a fragment whose rows are all deleted leaves the manifest: no empty shard
    assert [(s.id, s.num_samples) for s in ds.shards] == [("fragment-0", 240), ("fragment-1", 240)]
    assert check_reader(ds, live, seed=3) > 480
    assert read_all(ds) == live[0] + live[1]
    # indices map to live rows deterministically: index i is the i-th live row, every time
    assert ds.reader.read(0, np.array([0, 1, 239])) == [live[0][0], live[0][1], live[0][239]]
    assert Dataset.from_path("d", str(root)).reader.read(1, np.array([5])) == [live[1][5]]


def test_fingerprint_detects_changed_data_on_resume(corpus, docs):
    root, _ = corpus

    def pipeline(**options) -> Pipeline:
        ds = Dataset.from_path("docs", str(root), **options)
        source = StaticMixtureWorkSource([ds], mixture=MixtureSpec({"docs": 1.0}), chunk_size=32, seed=5)
        return Pipeline(source).fetch(parallelism=1).batch(microbatch_size=16).options(lanes=2, runner="inline")

    with pipeline() as p:
        it = iter(p)
        first = [next(it) for _ in range(4)]
        state = p.state_dict()
        expected = [next(it) for _ in range(4)]
    lance.write_dataset(pa.Table.from_pylist(docs[:10]), str(root), mode="append")
    with pipeline() as p, pytest.raises(CheckpointError, match=r"version: 3 in checkpoint, 4 now"):
        p.load_state_dict(state)
    with pipeline(version=3) as p:  # the pinned old version resumes exactly
        p.load_state_dict(state)
        it = iter(p)
        resumed = [next(it) for _ in range(4)]
    assert [b.data["id"].tolist() for b in resumed] == [b.data["id"].tolist() for b in expected]
    assert first[0].data["id"].tolist() != expected[0].data["id"].tolist()


@pytest.mark.slow
def test_pipeline_threads_and_processes(corpus):
    root, shards = corpus
    ds = Dataset.from_path("docs", str(root))
    assert check_fetch_runners([(ds, shards)]) >= 2900  # same batches from threads and processes
