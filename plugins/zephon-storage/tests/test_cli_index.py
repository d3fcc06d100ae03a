"""``zephon index`` (a command of zephon-storage): in parallel the same bytes as one job, the data
files' permissions, quiet output unless on a terminal, and a clear error for data no format knows."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from zephon_storage.cli_index import FileProgress

from zephon_core.testing.cli import run_cli
from zephon_core.testing.corpus import documents


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZEPHON_CACHE_DIR", str(tmp_path / "cache"))


def _jsonl_folder(folder: Path, files: int = 8, mode: int = 0o644) -> Path:
    pytest.importorskip("zephon_jsonl")
    docs = documents(limit=files * 40)
    folder.mkdir()
    for k in range(files):
        path = folder / f"part-{k:02d}.jsonl"
        path.write_text("".join(json.dumps(d) + "\n" for d in docs[k * 40 : (k + 1) * 40 - k]))
        path.chmod(mode)
    return folder


def _index_files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.name.endswith((".zidx", ".json"))}


# -- zephon index ----------------------------------------------------------------------------------
def test_parallel_indexing_writes_the_same_bytes_as_one_job(tmp_path: Path) -> None:
    folder = _jsonl_folder(tmp_path / "data")

    def build(*flags: str) -> tuple[dict[str, bytes], str, str]:
        for p in folder.iterdir():
            if p.name.endswith(".zidx") or p.name.startswith("_zephon"):
                p.unlink()
        code, out, err = run_cli("index", str(folder), *flags)
        assert code == 0, err
        return _index_files(folder), out, err

    one, _, _ = build("--jobs", "1", "--checksum")
    assert len(one) == 9  # 8 indexes and the manifest
    four, out, err = build("--jobs", "4", "--checksum")
    assert four == one
    assert build("--jobs", "3")[0].keys() == one.keys()
    # Not a terminal: one parseable summary line, nothing on stderr.
    assert err == "" and out.count("\n") == 1 and "8 files, 292 records; 8 index(es) built" in out


@pytest.mark.parametrize("mode", [0o640, 0o664, 0o600])
def test_index_files_take_the_data_files_permissions(tmp_path: Path, mode: int) -> None:
    folder = _jsonl_folder(tmp_path / "data", files=3, mode=mode)
    assert run_cli("index", str(folder), "--jobs", "2")[0] == 0
    written = [p for p in folder.iterdir() if p.name.endswith(".zidx") or p.name == "_zephon_manifest.json"]
    assert len(written) == 4
    assert {p.name: oct(stat.S_IMODE(p.stat().st_mode)) for p in written} == {p.name: oct(mode) for p in written}


def test_a_manifest_is_no_more_open_than_any_file_it_lists(tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    pa = pytest.importorskip("pyarrow")
    pytest.importorskip("zephon_parquet")
    folder = tmp_path / "pq"
    folder.mkdir()
    for k, mode in enumerate((0o644, 0o640)):
        pq.write_table(pa.table({"x": list(range(k, k + 5))}), folder / f"part-{k}.parquet")
        (folder / f"part-{k}.parquet").chmod(mode)
    assert run_cli("index", str(folder), "--jobs", "2")[0] == 0
    assert stat.S_IMODE((folder / "_zephon_manifest.json").stat().st_mode) == 0o640


def test_the_builder_reports_progress_per_file(tmp_path: Path) -> None:
    from zephon_jsonl.index import build_index

    folder = _jsonl_folder(tmp_path / "data", files=5)
    calls: list[tuple[int, int]] = []
    build_index(str(folder), jobs=3, progress=lambda done, total: calls.append((done, total)))
    assert calls[0] == (0, 5) and calls[-1] == (5, 5)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls) and len(calls) == 6


def test_the_progress_bar_draws_only_when_asked(capsys: pytest.CaptureFixture[str]) -> None:
    quiet = FileProgress("indexing x")
    quiet(0, 3)
    quiet(3, 3)
    quiet.close()
    assert quiet.bar is not None and not quiet.bar.enabled and quiet.calls == 2
    assert capsys.readouterr().err == ""
    drawn = FileProgress("indexing x", draw=True)
    drawn(1, 3)
    drawn(3, 3)
    drawn.close()
    assert "indexing x" in capsys.readouterr().err


def test_jobs_must_be_positive(tmp_path: Path) -> None:
    folder = _jsonl_folder(tmp_path / "data", files=1)
    code, _, err = run_cli("index", str(folder), "--jobs", "0")
    assert code == 2 and "--jobs must be at least 1" in err


def test_index_on_unknown_layout_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    out = subprocess.run(
        [sys.executable, "-m", "zephon_core.cli", "index", str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 2
    assert "no installed format recognises" in out.stderr and "Traceback" not in out.stderr
