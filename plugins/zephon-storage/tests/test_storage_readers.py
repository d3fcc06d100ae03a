"""zephon_storage's reader base classes: options, data-file detection, index files, pickling.

The five reader plugins exercise these on real data; here each rule is pinned on its own, so a
change to the base classes that would change every reader at once fails in one obvious place.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import fsspec
import numpy as np
import pytest
from zephon_storage import (
    INTEGRITY_OPTIONS,
    STORAGE_OPTIONS,
    DataFiles,
    FileReader,
    check_sample_indices,
    detect_index,
    in_request_order,
    index_path,
    parse_index_json,
    storage_kwargs,
)

from zephon_core import ConfigError, ReaderError, ShardInfo

TEXT = DataFiles((".txt",), "text files (.txt)", compressions=(("", "none"), (".gz", "gzip")))


class LinesReader(FileReader):
    """A minimal file-per-shard reader: one sample per line of a ``.txt`` file."""

    format = "lines"
    data_files = TEXT
    _RUNTIME = ("_opened_count",)

    def __init__(self, path: str, *, upper: bool = False, prefetch: int = 0, open_files: int = 1, **storage: Any):
        super().__init__(path, prefetch=prefetch, open_files=open_files, manifest=True, storage=storage)
        self.upper = upper
        self._init_runtime()

    def _init_runtime(self) -> None:
        super()._init_runtime()
        self._opened_count = 0

    def _open_file(self, i: int) -> tuple[list[str], Any]:
        self._opened_count += 1
        local = self.storage.open_local(self.files()[i].rel)
        with open(local.path) as f:
            return f.read().splitlines(), local.release

    def shards(self) -> list[ShardInfo]:
        return [ShardInfo(f.rel, len(self._opened(i))) for i, f in enumerate(self.files())]

    def read(self, shard: int, indices: np.ndarray) -> list[dict[str, Any]]:
        self._check_shard(shard)
        lines = self._opened(shard)
        uniq, inv = np.unique(np.asarray(indices, dtype=np.int64), return_inverse=True)
        rows = [{"line": lines[i].upper() if self.upper else lines[i]} for i in uniq.tolist()]
        return in_request_order(rows, inv, len(indices))


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ZEPHON_CACHE_DIR", str(tmp_path / "cache"))
    d = tmp_path / "ds"
    (d / "sub").mkdir(parents=True)
    (d / "a.txt").write_text("x\ny\nz\n")
    (d / "sub" / "b.TXT").write_text("p\nq\n")
    (d / "_SUCCESS").write_text("")
    (d / ".hidden.txt").write_text("no\n")
    (d / "notes.md").write_text("no\n")
    return d


def test_unknown_options_name_the_reader_and_the_valid_ones(folder: Path) -> None:
    assert storage_kwargs("x", {"retries": 2}) == {"retries": 2}
    with pytest.raises(ConfigError, match=r"lines reader: unknown option\(s\) \['colour'\]; valid options: \[") as info:
        LinesReader(str(folder), colour="red")
    for name in ("upper", "prefetch", "open_files", *STORAGE_OPTIONS, *INTEGRITY_OPTIONS):
        assert repr(name) in str(info.value)
    assert LinesReader.option_names() == sorted({"upper", "prefetch", "open_files", *STORAGE_OPTIONS, *INTEGRITY_OPTIONS})


def test_data_files_by_suffix_compression_and_privacy() -> None:
    assert TEXT.compression_of("a/b.TXT") == "none" and TEXT.compression_of("b.txt.gz") == "gzip"
    assert TEXT.compression_of("b.gz") is None and TEXT.compression_of("b.txt.zst") is None
    assert TEXT.accepts("sub/b.txt") and not TEXT.accepts("_tmp/b.txt") and not TEXT.accepts(".b.txt")
    assert TEXT.detect(None, "/", ["notes.md", "a.txt"]) and not TEXT.detect(None, "/", ["notes.md", "_x.txt"])


def test_file_reader_lists_reads_and_keeps_open_files_bounded(folder: Path) -> None:
    reader = LinesReader(str(folder))
    assert [s.id for s in reader.shards()] == ["a.txt", "sub/b.TXT"]
    a, b = reader.read(0, np.array([2, 0, 2]))[::2]
    assert a == b == {"line": "z"} and a is not b  # repeats are separate dicts
    assert reader.read(1, np.array([1])) == [{"line": "q"}]
    assert len(reader._open) == 1 and reader._opened_count == 4  # a, b (listing), a, b: open_files=1
    with pytest.raises(ReaderError, match=r"shard 2 does not exist \(2 files\)"):
        reader.read(2, np.array([0]))
    reader.close()
    assert not reader._open
    (folder / "empty").mkdir()
    with pytest.raises(ReaderError, match=r"empty/: no text files \(\.txt\) found"):
        LinesReader(str(folder / "empty")).files()


def test_file_reader_pickles_its_configuration_and_listing_only(folder: Path) -> None:
    reader = LinesReader(str(folder), upper=True)
    reader.read(0, np.array([0]))
    clone = pickle.loads(pickle.dumps(reader))
    assert clone._files == reader._files and clone._opened_count == 0 and not clone._open
    assert clone.read(0, np.array([1])) == [{"line": "Y"}]


def test_manifest_written_and_enforced(folder: Path) -> None:
    assert LinesReader(str(folder)).save_manifest().endswith("_zephon_manifest.json")
    (folder / "c.txt").write_text("new\n")
    with pytest.raises(ReaderError, match=r"c\.txt: not listed in _zephon_manifest\.json"):
        LinesReader(str(folder)).files()
    assert LinesReader(str(folder / "a.txt")).save_manifest() == "single file: no manifest"


def test_index_files_are_found_and_checked(tmp_path: Path) -> None:
    assert index_path("s3://b/ds/") == "s3://b/ds/index.json" == index_path("s3://b/ds/index.json")
    (tmp_path / "index.json").write_text(json.dumps({"shards": []}))
    fs = fsspec.filesystem("file")
    is_ours = lambda obj: isinstance(obj, dict) and "shards" in obj
    assert detect_index(fs, str(tmp_path), ["index.json"], is_ours)
    assert not detect_index(fs, str(tmp_path), ["other.json"], is_ours)
    assert not detect_index(fs, str(tmp_path), ["index.json"], lambda obj: False)
    assert parse_index_json(b'{"shards": []}', "u", is_ours, "ours") == {"shards": []}
    with pytest.raises(ReaderError, match=r"u: index\.json is not valid JSON"):
        parse_index_json(b"{", "u", is_ours, "ours")
    with pytest.raises(ReaderError, match=r"u: index\.json is not ours \(needs shards\)"):
        parse_index_json(b"[]", "u", is_ours, "ours (needs shards)")


def test_sample_indices_are_checked() -> None:
    assert check_sample_indices(np.array([0, 4]), 5, "w", "shard").dtype == np.int64
    with pytest.raises(ReaderError, match=r"w: sample index -1 out of range \(chunk has 5\)"):
        check_sample_indices(np.array([3, -1, 9]), 5, "w", "chunk")
