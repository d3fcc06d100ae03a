"""Bad records in JSON Lines: found ahead of time by ``zephon index --validate``, skipped on request.

A corrupt line is otherwise met when a run first reads it, maybe hours in. ``--validate`` lists
every one by file and byte offset; ``on_error="skip"`` drops exactly those records (tombstones: the
same ones on every runner and after a resume); ``max_bad_fraction`` still stops a run over data that
is mostly broken.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from zephon_storage.testing.readers import fetch_pipeline, run_cli

from zephon_core import ConfigError, Dataset, ReaderError, ZephonError, hash_global_batch
from zephon_core.cli import main
from zephon_core.testing.corpus import documents

pytestmark = pytest.mark.timeout(120)

BAD = {5: b"{not json at all", 40: b"[1, 2, 3]"}
"""Records of ``p1.jsonl`` replaced by a line that is not JSON, and one that is not an object."""


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZEPHON_CACHE_DIR", str(tmp_path / "zephon-cache"))


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """``p0``-``p2.jsonl`` of 100 documents each; two records of ``p1`` are bad (see :data:`BAD`)."""
    docs = documents(limit=300)
    root = tmp_path / "ds"
    root.mkdir()
    for k in range(3):
        lines = [json.dumps(d).encode() for d in docs[k * 100 : (k + 1) * 100]]
        if k == 1:
            for i, line in BAD.items():
                lines[i] = line
        (root / f"p{k}.jsonl").write_bytes(b"".join(line + b"\n" for line in lines))
    return root


def byte_of(folder: Path, record: int) -> int:
    """Where record ``record`` of ``p1.jsonl`` starts."""
    data = (folder / "p1.jsonl").read_bytes()
    return sum(len(line) + 1 for line in data.split(b"\n")[:record])


def test_validate_reports_each_bad_record_by_file_and_byte(folder: Path) -> None:
    code, out, err = run_cli("index", str(folder), "--validate", "--jobs", "2")
    assert code == 1, out + err
    assert f"p1.jsonl: record 5 (byte {byte_of(folder, 5)}): invalid JSON" in out
    assert f"p1.jsonl: record 40 (byte {byte_of(folder, 40)}): is a JSON list, not an object" in out
    assert "validated 3 file(s), 300 record(s): 2 bad record(s), 0 unreadable file(s)" in out
    assert err == ""  # not a terminal: no progress
    again = run_cli("index", str(folder), "--validate", "--jobs", "1")[1]
    assert again.splitlines()[1:] == out.splitlines()[1:]  # the same report, validated in-process


def test_validate_shows_progress_on_a_terminal(folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert main(["index", str(folder), "--validate", "--jobs", "1"]) == 1
    err = capsys.readouterr().err
    assert "\rvalidating: 1/3 files, 100 records, 0 bad" in err and "validating: 3/3 files, 300 records, 2 bad\n" in err


def test_validate_reports_an_unreadable_file_and_goes_on(folder: Path) -> None:
    from zephon_storage import validate

    ds = Dataset.from_path("bad", str(folder))
    (folder / "p2.jsonl").write_bytes((folder / "p2.jsonl").read_bytes()[:1000])  # cut after listing
    result = validate(ds.reader, jobs=1)
    assert (result.files, result.records, result.bad_records, result.bad_files) == (3, 200, 2, 1)
    (whole,) = [b for b in result.bad if b.whole_file]
    assert whole.file == "p2.jsonl" and "p2.jsonl: has 1000 bytes but its index was built for" in whole.line()


def pipeline_run(ds: Dataset, runner: str, parallelism: int = 2) -> tuple[list[str], list[int], set[tuple[int, int]]]:
    """Batch hashes, delivered ids and the (shard, index) of every dropped record."""
    pipe = fetch_pipeline([ds], runner=runner, parallelism=parallelism)
    hashes, ids, dropped = [], [], set()
    with pipe:
        for batch in pipe:
            hashes.append(hash_global_batch([batch]))
            ids.extend(int(i) for i in batch.data["id"])
            for lin in batch.dropped:
                p = pipe.source.pointer(lin[0])
                dropped.add((p.shard, p.index))
    return hashes, ids, dropped


def test_skipped_records_are_tombstones_on_every_runner(folder: Path) -> None:
    ds = Dataset.from_path("bad", str(folder), on_error="skip")
    runs = {runner: pipeline_run(ds, runner) for runner in ("inline", "threads", "processes")}
    _, ids, dropped = runs["threads"]
    assert all(run == runs["threads"] for run in runs.values())
    bad_ids = {100 + i for i in BAD}  # document ids are positions in the corpus
    assert not bad_ids & set(ids) and len(set(ids)) == len(ids)
    assert dropped <= {(1, i) for i in BAD}  # the rest are in a partial last microbatch or still to come
    with pytest.raises(ZephonError, match=r"p1\.jsonl: record (5|40) \(byte \d+\)"):
        pipeline_run(Dataset.from_path("bad", str(folder)), "threads")


def test_skipping_survives_a_resume(folder: Path) -> None:
    ds = Dataset.from_path("bad", str(folder), on_error="skip")
    whole = fetch_pipeline([ds], runner="threads")
    with whole:
        expected = [hash_global_batch([b]) for b in whole]
    first = fetch_pipeline([ds], runner="threads")
    got = []
    with first:
        it = iter(first)
        for _ in range(4):  # two rounds of two lanes
            got.append(hash_global_batch([next(it)]))
        state = first.state_dict()
    resumed = fetch_pipeline([ds], runner="processes")
    resumed.load_state_dict(state)
    with resumed:
        got.extend(hash_global_batch([b]) for b in resumed)
    assert got == expected


def test_max_bad_fraction_stops_mostly_broken_data(tmp_path: Path) -> None:
    root = tmp_path / "broken"
    root.mkdir()
    lines = [json.dumps({"id": i, "text": "x", "source": "s"}) if i % 3 == 2 else "{broken" for i in range(600)]
    (root / "a.jsonl").write_text("\n".join(lines) + "\n")
    ds = Dataset.from_path("broken", str(root), on_error="skip")
    with pytest.raises(ReaderError, match=r"jsonl dataset .*: \d+ of the \d+ records read so far do not decode \(\d+%\), more than max_bad_fraction=0\.1"):
        ds.reader.read_or_skip(0, np.arange(600))
    lenient = Dataset.from_path("broken", str(root), on_error="skip", max_bad_fraction=0.9)
    rows = lenient.reader.read_or_skip(0, np.arange(600))
    assert sum(r is not None for r in rows) == 200
    with pytest.raises(ConfigError, match="max_bad_fraction applies only with on_error='skip'"):
        Dataset.from_path("broken", str(root), max_bad_fraction=0.5)
    with pytest.raises(ConfigError, match=r"on_error must be one of \['raise', 'skip'\]"):
        Dataset.from_path("broken", str(root), on_error="ignore")


def test_a_short_file_is_never_skipped(folder: Path) -> None:
    ds = Dataset.from_path("bad", str(folder), on_error="skip")
    data = (folder / "p0.jsonl").read_bytes()
    (folder / "p0.jsonl").write_bytes(data[:1000])
    with pytest.raises(ReaderError, match=r"p0\.jsonl: has 1000 bytes but its index was built for"):
        ds.reader.read_or_skip(0, np.arange(10))


def test_same_records_skipped_with_other_parallelism(folder: Path) -> None:
    ds = Dataset.from_path("bad", str(folder), on_error="skip")
    assert pipeline_run(ds, "threads", parallelism=1) == pipeline_run(ds, "threads", parallelism=3)


def test_skipped_records_are_counted_per_dataset(folder: Path) -> None:
    ds = Dataset.from_path("bad", str(folder), on_error="skip")
    pipe = fetch_pipeline([ds], runner="threads")
    with pipe:
        for _ in pipe:
            pass
    # Read after close: a skip is counted when the fetch stage forwards the group, which can come
    # after the loop's last batch (the skip was made, its count not yet taken); close joins that thread.
    assert pipe.stats()["skipped_records"] == {"bad": len(BAD)}
