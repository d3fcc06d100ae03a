"""zephon_storage.sidecar: the index file kept beside each data file (JSON Lines, WebDataset).

Pinned here on a toy format (the start of every line), so a change to finding, checking, adopting
or writing sidecar indexes fails in one place rather than in two plugins' end-to-end tests.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from zephon_storage import (
    DataFiles,
    FileInfo,
    IndexedFileReader,
    SourceIdentity,
    check_sidecar_size,
    local_identity,
    read_sidecar_header,
    write_sidecar,
)

from zephon_core import ReaderError, ShardInfo

MAGIC = b"TLIX"


@dataclass
class LineStarts:
    starts: np.ndarray
    source: SourceIdentity


class LineStartsReader(IndexedFileReader[LineStarts]):
    """One sample per line of a ``.txt`` file, found through a ``.tlix`` sidecar of line starts."""

    format = "line-starts"
    data_files = DataFiles((".txt",), "text files (.txt)")
    index_suffix = ".tlix"

    def __init__(self, path: str, *, rebuild_stale: bool = False, index_dir: str | None = None, **storage: Any):
        super().__init__(path, prefetch=0, open_files=1, manifest=False, storage=storage)
        self._init_indexes(rebuild_stale=rebuild_stale, index_dir=index_dir)
        self._init_runtime()

    def _list_files(self) -> tuple[list[FileInfo], None]:
        listed = self.storage.list_files(lambda rel: rel.endswith((".txt", self.index_suffix)))
        files = [f for f in listed if f.rel.endswith(".txt")]
        self._remote_indexes = {f.rel for f in listed if f.rel.endswith(self.index_suffix)}
        self._check_orphan_indexes({f.rel for f in files})
        return files, None

    def _read_index(self, path: str, name: str) -> LineStarts:
        header, base = read_sidecar_header(path, name, MAGIC, 1, "line-starts")
        check_sidecar_size(path, name, base + 8 * int(header["count"]))
        starts = np.fromfile(path, dtype="<i8", offset=base)
        return LineStarts(starts, SourceIdentity.from_json(header["source"]))

    def _write_index(self, path: str, idx: LineStarts, info: FileInfo) -> None:
        header = {"count": len(idx.starts), "source": idx.source.to_json()}
        write_sidecar(
            path, MAGIC, 1, header, [idx.starts.astype("<i8").tobytes()], like=self.storage.full_path(info.rel)
        )

    def _with_source(self, idx: LineStarts, source: SourceIdentity) -> LineStarts:
        return LineStarts(idx.starts, source)

    def _build_index(self, i: int, paths: list[str]) -> LineStarts:
        info = self.files()[i]
        full = self.storage.full_path(info.rel)
        data = Path(full).read_bytes()
        starts = np.array([0, *(k + 1 for k, b in enumerate(data[:-1]) if b == ord("\n"))], dtype=np.int64)
        now = local_identity(full)
        ident = SourceIdentity(info.size, info.version, now.head_crc, now.tail_crc)
        return self._save_index(paths, LineStarts(starts, ident), info, self._name(i))

    def shards(self) -> list[ShardInfo]:
        return [ShardInfo(f.rel, len(self._index(i).starts)) for i, f in enumerate(self.files())]

    def read(self, shard: int, indices: np.ndarray) -> list[dict[str, Any]]:
        return []


def _data(folder: Path, text: str = "a\nbb\nccc\n", mtime_s: int = 1_700_000_000) -> Path:
    path = folder / "part.txt"
    path.write_text(text)
    os.utime(path, (mtime_s, mtime_s))
    return path


def test_index_is_built_once_beside_the_data_then_reused(tmp_path: Path) -> None:
    _data(tmp_path)
    first = LineStartsReader(str(tmp_path), cache_dir=str(tmp_path / "cache"))
    assert first.shards() == [ShardInfo("part.txt", 3)] and first.built_indexes == 1
    assert (tmp_path / "part.txt.tlix").exists()
    again = LineStartsReader(str(tmp_path), cache_dir=str(tmp_path / "cache"))
    assert again.shards() == [ShardInfo("part.txt", 3)] and again.built_indexes == 0


def test_a_changed_data_file_makes_a_stale_index_error_naming_file_and_index(tmp_path: Path) -> None:
    _data(tmp_path)
    LineStartsReader(str(tmp_path), cache_dir=str(tmp_path / "cache")).shards()
    _data(tmp_path, "a\nbb\nccc\ndddd\n", mtime_s=1_700_000_100)  # appended: size and mtime differ
    with pytest.raises(ReaderError, match=r"part\.txt: index .*part\.txt\.tlix is stale \(built for a file of 9 bytes"):
        LineStartsReader(str(tmp_path), cache_dir=str(tmp_path / "cache")).shards()
    rebuilt = LineStartsReader(str(tmp_path), cache_dir=str(tmp_path / "cache"), rebuild_stale=True)
    assert rebuilt.shards() == [ShardInfo("part.txt", 4)] and rebuilt.built_indexes == 1


def test_same_size_but_other_bytes_is_stale_same_bytes_under_a_new_mtime_is_adopted(tmp_path: Path) -> None:
    _data(tmp_path)
    LineStartsReader(str(tmp_path), cache_dir=str(tmp_path / "cache")).shards()
    _data(tmp_path, "a\nbb\nccx\n", mtime_s=1_700_000_100)  # same size, one byte differs
    with pytest.raises(ReaderError, match="is stale"):
        LineStartsReader(str(tmp_path), cache_dir=str(tmp_path / "cache")).shards()
    _data(tmp_path, "a\nbb\nccc\n", mtime_s=1_700_000_200)  # the indexed bytes again (a copy, new mtime)
    copy = LineStartsReader(str(tmp_path), cache_dir=str(tmp_path / "cache"))
    assert copy.shards() == [ShardInfo("part.txt", 3)] and copy.built_indexes == 0
    header, _ = read_sidecar_header(str(tmp_path / "part.txt.tlix"), "part.txt", MAGIC, 1, "line-starts")
    assert header["source"]["version"] == copy.files()[0].version  # adopted: the CRCs are not read again


def test_an_index_without_its_data_file_is_an_error(tmp_path: Path) -> None:
    _data(tmp_path)
    (tmp_path / "gone.txt.tlix").write_bytes(b"")
    with pytest.raises(ReaderError, match=r"gone\.txt: missing, but its index gone\.txt\.tlix is there \(the file"):
        LineStartsReader(str(tmp_path)).files()


def test_sidecar_frame_permissions_and_errors(tmp_path: Path) -> None:
    data = _data(tmp_path)
    data.chmod(0o640)
    path = str(tmp_path / "sub" / "x.tlix")
    write_sidecar(path, MAGIC, 3, {"count": 1}, iter([b"12345678"]), like=str(data))
    raw = Path(path).read_bytes()
    assert raw[:4] == MAGIC and raw[4] == 3 and raw.endswith(b"12345678") and (len(raw) - 8) % 8 == 0
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640
    assert read_sidecar_header(path, "x", MAGIC, 3, "toy") == ({"count": 1}, len(raw) - 8)
    assert os.listdir(tmp_path / "sub") == ["x.tlix"]  # no temp file left behind
    write_sidecar(path, MAGIC, 3, {"count": 1}, iter([b"12345678"]), mode=0o600)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    with pytest.raises(ReaderError, match=r"x: index .*x\.tlix is not a toy index"):
        read_sidecar_header(path, "x", b"NOPE", 3, "toy")
    with pytest.raises(ReaderError, match="has version 3, expected 4; rebuild it"):
        read_sidecar_header(path, "x", MAGIC, 4, "toy")
    with pytest.raises(ReaderError, match="is truncated"):
        check_sidecar_size(path, "x", len(raw) + 8)


def test_identity_matches_a_copy_not_a_change(tmp_path: Path) -> None:
    data = _data(tmp_path)
    built = local_identity(str(data))
    os.utime(data, (1_800_000_000, 1_800_000_000))
    assert built.matches(local_identity(str(data)))  # new mtime, same bytes
    assert not SourceIdentity(built.size, built.version).matches(local_identity(str(data)))  # no CRCs to fall back on
    data.write_text("a\nbb\nccx\n")
    assert not built.matches(local_identity(str(data)))
