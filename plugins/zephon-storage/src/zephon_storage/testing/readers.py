"""Test kit for reader plugins: shards of the shared corpus, read-back checks, and shared test classes.

Every format is checked the same way, so the comparisons live here once:

* :func:`split`, :func:`read_all`, :func:`check_reader`, :func:`fetch_pipeline`,
  :func:`check_pipeline`, :func:`check_fetch_runners` and :func:`run_explained` cut the corpus into
  shards and compare what a reader (or a whole pipeline, in threads and in worker processes)
  returns with it, sample by sample.
* :class:`CorpusConformance` runs :class:`~zephon_storage.testing.conformance.ReaderConformance`
  on corpus documents written by the format's own writer.
* :class:`FileReaderFaults` and :class:`ColumnarReaderFaults` are the bad-input tests every
  file-per-shard reader must pass (a fault is a ``ReaderError`` that names the file), including
  the ``zephon index`` manifest (a missing or short file) and ``verify="checksum"``.
* :func:`cross_format_hashes` hashes the global steps of a pipeline over a dataset, to compare a
  format with the same rows as :func:`plain_parquet` (records batched by :func:`canonical_collate`).
* :func:`run_cli`, :func:`flip_byte` and :func:`zephon_index` drive ``zephon index`` and damage a
  file the way storage does (same size and mtime), for tests of a format's own.

The test classes are not collected until subclassed; a subclass sets the class attributes and
implements ``write``, and may add format-specific tests as methods.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from zephon_core import (
    ConfigError,
    Dataset,
    MixtureSpec,
    OperatorError,
    Pipeline,
    Reader,
    ReaderError,
    StaticMixtureWorkSource,
    ZephonError,
    hash_global_batch,
)
from zephon_core.conformance.harness import run_global
from zephon_core.testing.cli import run_cli
from zephon_core.testing.corpus import documents
from zephon_storage.testing.conformance import ReaderConformance

Record = dict[str, Any]




def zephon_index(path: str | Path, *flags: str) -> str:
    """``zephon index PATH [flags]`` (e.g. ``--checksum``), which must succeed; returns its output."""
    code, out, err = run_cli("index", str(path), *flags)
    assert code == 0, f"zephon index {path} {' '.join(flags)} exited {code}:\n{out}\n{err}"
    return out


def manifest_of(folder: str | Path) -> dict[str, Any]:
    """The ``_zephon_manifest.json`` of a dataset folder, parsed."""
    manifest: dict[str, Any] = json.loads((Path(folder) / "_zephon_manifest.json").read_text())
    return manifest


def flip_byte(path: Path, offset: int | None = None) -> int:
    """Flip one byte of ``path`` (default: in the middle) keeping its size and mtime, as bit rot would.

    Size and mtime unchanged means no listing, manifest size or index staleness check can see it:
    only a content checksum (or the format's own CRCs) can. Returns the offset.
    """
    st = path.stat()
    data = bytearray(path.read_bytes())
    at = len(data) // 2 if offset is None else offset
    data[at] ^= 0x5A
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    return at


def split(docs: Sequence[Record], sizes: Sequence[int]) -> list[list[Record]]:
    """Cut ``docs`` into consecutive shards of the given sizes (the last takes the rest)."""
    out, start = [], 0
    for n in sizes:
        out.append(list(docs[start : start + n]))
        start += n
    if start < len(docs):
        out.append(list(docs[start:]))
    return out


def read_all(source: Dataset | Reader) -> list[Record]:
    """Every sample of a dataset (or reader), shard after shard, in index order."""
    reader = source.reader if isinstance(source, Dataset) else source
    return [r for s, info in enumerate(reader.shards()) for r in reader.read(s, np.arange(info.num_samples))]


def check_reader(ds: Dataset, shards: Sequence[Sequence[Record]], seed: int = 0) -> int:
    """Read every sample of every shard (shuffled, with repeats, in batches) and compare; returns count."""
    assert [s.num_samples for s in ds.shards] == [len(s) for s in shards]
    rng = np.random.default_rng(seed)
    checked = 0
    for k, expected in enumerate(shards):
        order = rng.permutation(len(expected))
        order = np.concatenate([order, rng.integers(0, len(expected), size=max(1, len(expected) // 10))])
        for part in np.array_split(order, max(1, len(order) // 97)):
            got = ds.reader.read(k, part)
            assert len(got) == len(part)
            for i, row in zip(part.tolist(), got):
                assert row == expected[i], f"shard {k} index {i}: {row!r} != {expected[i]!r}"
                checked += 1
    return checked


def fetch_pipeline(
    datasets: Sequence[Dataset], *, runner: str = "threads", parallelism: int = 2, lanes: int = 2
) -> Pipeline:
    """Shuffled fetch + batch(32) over a mixture of ``datasets`` (equal weights)."""
    source = StaticMixtureWorkSource(
        list(datasets), mixture=MixtureSpec({d.name: 1.0 for d in datasets}, ratios=True), chunk_size=64, seed=7
    )
    return (
        Pipeline(source)
        .fetch(parallelism=parallelism, runner=runner)
        .batch(microbatch_size=32)
        .options(lanes=lanes, runner="inline")
    )


def check_pipeline(
    pipe: Pipeline, lookup: Callable[[str, int, int], Record], fields: Sequence[str] = ("id", "text", "source")
) -> tuple[list[str], int]:
    """Run ``pipe`` to the end, comparing every row with ``lookup(dataset, shard, index)``.

    Returns the per-microbatch hashes and the number of rows checked.
    """
    hashes, rows = [], 0
    with pipe:
        for batch in pipe:
            hashes.append(hash_global_batch([batch]))
            for r, pointers in enumerate(pipe.explain(batch)):
                (p,) = pointers
                want = lookup(p.dataset, p.shard, p.index)
                for f in fields:
                    got = batch.data[f][r]
                    got = got.item() if isinstance(got, np.generic) else got
                    assert got == want[f], f"{p}: field {f!r}: {got!r} != {want[f]!r}"
                rows += 1
    return hashes, rows


def unknown_option_message(reader: str, option: str) -> str:
    """A regex for the ``ConfigError`` of an unknown reader option: it names the reader and the valid options."""
    return rf"{re.escape(reader)} reader: unknown option\(s\) \[{re.escape(repr(option))}\]; valid options: \[.*'cache_dir'"


def check_fetch_runners(
    expected: Sequence[tuple[Dataset, Sequence[Sequence[Record]]]], fields: Sequence[str] = ("id", "text", "source")
) -> int:
    """:func:`fetch_pipeline` over the datasets, with threads then with processes: rows checked.

    Every row must equal its source sample (``expected`` gives each dataset's shards, in the
    dataset's shard order), and both runs must give the same batches: a reader that pickles badly
    into worker processes, or reads differently there, fails here.
    """
    table = {ds.name: shards for ds, shards in expected}

    def lookup(name: str, shard: int, index: int) -> Record:
        return table[name][shard][index]

    datasets = [ds for ds, _ in expected]
    hashes, rows = check_pipeline(fetch_pipeline(datasets, runner="threads", parallelism=2), lookup, fields)
    in_processes, _ = check_pipeline(fetch_pipeline(datasets, runner="processes", parallelism=2), lookup, fields)
    assert in_processes == hashes, "worker processes read other batches than threads"
    return rows


def run_explained(pipe: Pipeline) -> tuple[list[str], list[tuple[Any, Record]]]:
    """Run ``pipe`` (one source pointer per row) to the end: batch hashes and ``(pointer, row)`` per row.

    The pointer says which sample a row came from, so a test can compare the row with its source.
    """
    hashes: list[str] = []
    rows: list[tuple[Any, Record]] = []
    with pipe:
        for batch in pipe:
            hashes.append(hash_global_batch([batch]))
            for r, (pointer,) in enumerate(pipe.explain(batch)):
                rows.append((pointer, {k: batch.data[k][r] for k in batch.data}))
    return hashes, rows


def canonical_collate(rows: Sequence[Record]) -> dict[str, np.ndarray]:
    """Every field as an array; nested values (lists, structs) as their canonical JSON, so they hash exactly."""
    out = {}
    for key in rows[0]:
        values = [r[key] for r in rows]
        if isinstance(values[0], (list, dict)):
            values = [json.dumps(v, sort_keys=True) for v in values]
        out[key] = np.asarray(values)
    return out


def cross_format_hashes(ds: Dataset) -> list[str]:
    """Hashes of every global step of a shuffled fetch + batch pipeline over ``ds``, on two ranks.

    The same rows in the same shards give the same list whatever the format, so a format is
    checked by comparing with :func:`plain_parquet` of its rows (run by the conformance harness:
    4 lanes, 2 data-parallel ranks, fetch in 2 threads, chunks of 32, microbatches of 16).
    """

    def build(parallelism: int) -> Pipeline:
        source = StaticMixtureWorkSource([ds], mixture=MixtureSpec({ds.name: 1.0}), chunk_size=32, seed=11)
        return Pipeline(source).fetch(parallelism=parallelism).batch(microbatch_size=16, collate=canonical_collate)

    return run_global(build, lanes=4, world_size=2, parallelism=2).hashes


def plain_parquet(folder: Path, shards: Sequence[Sequence[Record]], name: str = "docs") -> Dataset:
    """``shards`` written by pyarrow as ``part-K.parquet`` files in a new ``folder``, read by zephon-parquet."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir()
    for k, rows in enumerate(shards):
        pq.write_table(pa.Table.from_pylist(list(rows)), folder / f"part-{k}.parquet", row_group_size=50)
    return Dataset.from_path(name, str(folder), format="parquet")


class SharedTests:
    """Base of shared test classes: not collected itself; a subclass is, unless it sets ``__test__ = False``.

    Test classes shared between plugins live in an installed module, so pytest must not run them
    there; a plugin's ``Test*`` subclass (which sets the class attributes) is what runs.
    """

    __test__ = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__test__" not in cls.__dict__:
            cls.__test__ = True


class CorpusConformance(ReaderConformance):
    """The reader conformance suite on corpus documents written by the format's own writer.

    Subclass with ``dataset_format`` set and ``write(folder, shards)`` implemented (one file per
    shard, in ``folder``); the suite then checks every sample against the corpus.
    """

    __test__ = False
    dataset_format: ClassVar[str] = ""
    shard_sizes: ClassVar[tuple[int, ...]] = (100, 140, 120)

    def write(self, folder: Path, shards: list[list[Record]]) -> None:
        """Write ``shards`` into the existing ``folder`` with the format's own writer."""
        raise NotImplementedError

    def shards(self) -> list[list[Record]]:
        """The documents per shard: the first ``sum(shard_sizes)`` documents of the corpus."""
        return split(documents(limit=sum(self.shard_sizes)), self.shard_sizes)

    @pytest.fixture(autouse=True)
    def _cache(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """A node cache per test: cached or decompressed copies must not leak between tests."""
        monkeypatch.setenv("ZEPHON_CACHE_DIR", str(tmp_path / "zephon-cache"))

    @pytest.fixture
    def reader_path(self, tmp_path: Path) -> str:
        folder = tmp_path / "ds"
        folder.mkdir()
        self.write(folder, self.shards())
        return str(folder)

    @pytest.fixture
    def reader_format(self) -> str:
        return self.dataset_format

    @pytest.fixture
    def expected_samples(self) -> list[list[Record]]:
        return self.shards()


class FileReaderFaults(SharedTests):
    """Bad input for a file-per-shard reader: every fault is a ``ReaderError`` naming the file.

    Subclass with ``dataset_format`` and ``suffix`` set and ``write(path, records)`` implemented.
    The ``one_file`` fixture is a folder holding one data file, ``part<suffix>``, of ``docs``
    (the first ``samples`` corpus documents).
    """

    __test__ = False
    dataset_format: ClassVar[str] = ""
    suffix: ClassVar[str] = ""
    samples: ClassVar[int] = 2000

    def write(self, path: Path, records: list[Record]) -> None:
        """Write ``records`` as one data file at ``path`` with the format's own writer."""
        raise NotImplementedError

    @property
    def part(self) -> str:
        """A regex matching the data file's name in messages."""
        return re.escape("part" + self.suffix)

    @pytest.fixture(autouse=True)
    def _cache_env(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """A node cache per test: a cached copy of a file a test damages must not serve the next test."""
        monkeypatch.setenv("ZEPHON_CACHE_DIR", str(tmp_path / "zephon-cache"))

    @pytest.fixture
    def docs(self) -> list[Record]:
        return documents(limit=self.samples)

    @pytest.fixture
    def one_file(self, tmp_path: Path, docs: list[Record]) -> Path:
        folder = tmp_path / "data"
        folder.mkdir()
        self.write(folder / f"part{self.suffix}", docs)
        return folder

    @pytest.fixture
    def three_files(self, tmp_path: Path, docs: list[Record]) -> Path:
        """A folder of ``p0``, ``p1``, ``p2`` (100 documents each)."""
        folder = tmp_path / "three"
        folder.mkdir()
        for k in range(3):
            self.write(folder / f"p{k}{self.suffix}", docs[k * 100 : (k + 1) * 100])
        return folder

    def build_index(self, path: str) -> str:
        """Run the format's ``zephon index`` on ``path`` and return its summary."""
        return zephon_index(path)

    def name(self, stem: str) -> str:
        """A regex matching data file ``stem`` (e.g. ``"p1"``) in messages."""
        return re.escape(stem + self.suffix)

    def test_index_records_sizes_counts_and_checksums(self, three_files: Path) -> None:
        zephon_index(three_files, "--checksum")
        files = manifest_of(three_files)["files"]
        assert [(f["path"], f["samples"]) for f in files] == [(f"p{k}{self.suffix}", 100) for k in range(3)]
        for f in files:
            assert f["size"] == (three_files / f["path"]).stat().st_size
            assert re.fullmatch(r"sha256:[0-9a-f]{64}", f["checksum"])

    def test_short_or_missing_file_is_an_error_with_a_manifest(self, three_files: Path, docs: list[Record]) -> None:
        self.build_index(str(three_files))
        p1 = three_files / f"p1{self.suffix}"
        kept = p1.read_bytes()
        self.write(p1, docs[100:150])  # a well-formed but shorter file: only the manifest can tell
        with pytest.raises(ReaderError, match=rf"{self.name('p1')}: has \d+ bytes, _zephon_manifest\.json says"):
            Dataset.from_path("x", str(three_files))
        p1.unlink()
        with pytest.raises(ReaderError, match=rf"{self.name('p1')}: (listed in _zephon_manifest\.json but )?missing"):
            Dataset.from_path("x", str(three_files))
        p1.write_bytes(kept)
        assert Dataset.from_path("x", str(three_files)).num_samples == 300

    def test_verify_checksum_catches_a_flipped_byte(self, three_files: Path, docs: list[Record]) -> None:
        zephon_index(three_files, "--checksum")
        flip_byte(three_files / f"p1{self.suffix}")
        ds = Dataset.from_path("x", str(three_files), verify="checksum")  # sizes agree: opening is fine
        assert [r["text"] for r in ds.reader.read(0, np.arange(3))] == [d["text"] for d in docs[:3]]
        mismatch = rf"{self.name('p1')}: content checksum mismatch: expected sha256:[0-9a-f]{{64}} .*actual sha256:[0-9a-f]{{64}}"
        with pytest.raises(ReaderError, match=mismatch):
            ds.reader.read(1, np.arange(3))
        with pytest.raises(ZephonError, match=mismatch):
            for _ in fetch_pipeline([ds], parallelism=2):
                pass

    def test_verify_checksum_needs_recorded_checksums(self, three_files: Path) -> None:
        with pytest.raises(ReaderError, match=r"verify='checksum' but there is no _zephon_manifest\.json; run `zephon index .* --checksum`"):
            Dataset.from_path("x", str(three_files), verify="checksum")
        self.build_index(str(three_files))
        with pytest.raises(ReaderError, match=rf"{self.name('p0')}: verify='checksum' but _zephon_manifest\.json has no checksum"):
            Dataset.from_path("x", str(three_files), verify="checksum")
        with pytest.raises(ConfigError, match=rf"{self.dataset_format} reader: verify must be"):
            Dataset.from_path("x", str(three_files), verify="md5")

    def test_validate_a_clean_dataset(self, three_files: Path) -> None:
        code, out, err = run_cli("index", str(three_files), "--validate", "--jobs", "1")
        assert code == 0, out + err
        assert "validated 3 file(s), 300 record(s): all 300 records read" in out
        assert err == ""  # stderr is not a terminal here: no progress line

    def test_missing_path_and_unknown_layout(self, tmp_path: Path) -> None:
        with pytest.raises(ReaderError, match="does not exist"):
            Dataset.from_path("x", str(tmp_path / "nope"))
        with pytest.raises(ReaderError, match="does not exist"):
            Dataset.from_path("x", str(tmp_path / "nope"), format=self.dataset_format)
        (tmp_path / "notes.txt").write_text("hello")
        with pytest.raises(ReaderError, match=rf"no installed format recognises .*installed formats: .*{self.dataset_format}"):
            Dataset.from_path("x", str(tmp_path))

    def test_unknown_option_is_a_config_error(self, one_file: Path) -> None:
        with pytest.raises(ConfigError, match=unknown_option_message(self.dataset_format, "colour")):
            Dataset.from_path("x", str(one_file), colour="blue")

    def test_file_deleted_after_listing(self, one_file: Path) -> None:
        ds = Dataset.from_path("x", str(one_file))
        (one_file / f"part{self.suffix}").unlink()
        with pytest.raises(ReaderError, match=self.part):
            ds.reader.read(0, np.array([0]))

    def test_error_inside_a_pipeline_names_the_file(self, one_file: Path) -> None:
        ds = Dataset.from_path("x", str(one_file))
        (one_file / f"part{self.suffix}").write_bytes(b"garbage")
        with pytest.raises(ZephonError, match=self.part) as info:
            for _ in fetch_pipeline([ds], parallelism=2):
                pass
        assert isinstance(info.value, (ReaderError, OperatorError))


class ColumnarReaderFaults(FileReaderFaults):
    """:class:`FileReaderFaults` plus what a columnar format with a footer must catch.

    Subclass with ``label`` (the format's name in "not a readable <label> file") and ``replaced``
    (the error for a file rewritten after listing) too. The same tests plus an unreadable object on
    S3 (moto's server on loopback) are ``zephon_storage.testing.s3.S3ColumnarReaderFaults``.
    """

    __test__ = False
    label: ClassVar[str] = ""
    replaced: ClassVar[str] = ""

    @property
    def unreadable(self) -> str:
        """A regex for the error about a file the format's library cannot open."""
        return f"not a readable {re.escape(self.label)} file"

    def test_truncated_file(self, one_file: Path) -> None:
        path = one_file / f"part{self.suffix}"
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
        with pytest.raises(ReaderError, match=rf"{self.part}: {self.unreadable}"):
            Dataset.from_path("x", str(one_file))

    def test_not_this_format_at_all(self, one_file: Path) -> None:
        (one_file / f"part{self.suffix}").write_bytes(b"hello world, not a data file" * 10)
        with pytest.raises(ReaderError, match=rf"{self.part}: {self.unreadable}"):
            Dataset.from_path("x", str(one_file))

    def test_missing_column(self, one_file: Path) -> None:
        with pytest.raises(ReaderError, match=rf"{self.part}: has no column\(s\) \['title'\]"):
            Dataset.from_path("x", str(one_file), columns=["text", "title"])

    def test_file_replaced_after_listing(self, one_file: Path, docs: list[Record]) -> None:
        ds = Dataset.from_path("x", str(one_file))
        self.write(one_file / f"part{self.suffix}", docs[:10])
        with pytest.raises(ReaderError, match=rf"{self.part}: {self.replaced}"):
            ds.reader.read(0, np.array([5]))

    def test_manifest_catches_missing_extra_and_changed_files(self, tmp_path: Path, docs: list[Record]) -> None:
        folder = tmp_path / "m"
        folder.mkdir()
        for k in range(3):
            self.write(folder / f"p{k}{self.suffix}", docs[k * 100 : (k + 1) * 100])
        assert "_zephon_manifest.json" in self.build_index(str(folder))
        assert Dataset.from_path("x", str(folder)).num_samples == 300
        p1 = re.escape(f"p1{self.suffix}")
        (folder / f"p1{self.suffix}").rename(tmp_path / f"away{self.suffix}")
        with pytest.raises(ReaderError, match=rf"{p1}: listed in _zephon_manifest\.json but missing"):
            Dataset.from_path("x", str(folder))
        (tmp_path / f"away{self.suffix}").rename(folder / f"p1{self.suffix}")
        self.write(folder / f"p3{self.suffix}", docs[:10])
        with pytest.raises(ReaderError, match=rf"{re.escape(f'p3{self.suffix}')}: not listed in _zephon_manifest\.json"):
            Dataset.from_path("x", str(folder))
        (folder / f"p3{self.suffix}").unlink()
        self.write(folder / f"p2{self.suffix}", docs[:50])
        with pytest.raises(ReaderError, match=rf"{re.escape(f'p2{self.suffix}')}: has \d+ bytes, _zephon_manifest\.json says"):
            Dataset.from_path("x", str(folder))
        assert Dataset.from_path("x", str(folder), manifest=False).num_samples == 250

