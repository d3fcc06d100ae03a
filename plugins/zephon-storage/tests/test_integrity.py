"""Damaged data in the storage layer, pinned format-independently: manifests with checksums,
``verify="checksum"`` (once per node for remote files), ``on_error="skip"`` with
``max_bad_fraction``, and ``validate``.

The five reader plugins run the same rules on real files (``zephon_core.testing`` shared tests);
here each rule is checked on a minimal reader so a change to the base classes fails in one place.
"""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path
from typing import Any

import fsspec
import numpy as np
import pytest
from zephon_storage import (
    DataFiles,
    FileReader,
    ShardCache,
    Storage,
    checksum_of,
    in_request_order,
    open_verified,
    validate,
)

from zephon_core import ConfigError, ReaderError, RecordError, ShardInfo
from zephon_core.work.readers import MemoryReader

TEXT = DataFiles((".txt",), "text files (.txt)")


class LinesReader(FileReader):
    """One sample per line; a line ``BAD...`` does not decode (a :class:`RecordError`)."""

    format = "lines"
    data_files = TEXT

    def __init__(self, path: str, *, open_files: int = 4, manifest: bool = True, **storage: Any) -> None:
        super().__init__(path, prefetch=0, open_files=open_files, manifest=manifest, storage=storage)
        self._init_runtime()

    def _open_file(self, i: int) -> tuple[list[str], Any]:
        local = self._local(i)
        with open(local.path) as f:
            return f.read().splitlines(), local.release

    def shards(self) -> list[ShardInfo]:
        return self._held_to_manifest([ShardInfo(f.rel, len(self._opened(i))) for i, f in enumerate(self.files())])

    def read(self, shard: int, indices: np.ndarray) -> list[dict[str, Any]]:
        self._check_shard(shard)
        lines = self._opened(shard)
        uniq, inv = np.unique(np.asarray(indices, dtype=np.int64), return_inverse=True)
        rows = []
        for i in uniq.tolist():
            if lines[i].startswith("BAD"):
                raise RecordError(f"{self._name(shard)}: line {i}: does not decode")
            rows.append({"line": lines[i]})
        return in_request_order(rows, inv, len(indices))


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ZEPHON_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    d = tmp_path / "ds"
    d.mkdir()
    (d / "a.txt").write_text("".join(f"a{i}\n" for i in range(10)))
    (d / "b.txt").write_text("".join(("BAD\n" if i in (3, 4, 7) else f"b{i}\n") for i in range(10)))
    return d


@pytest.fixture
def remote(folder: Path) -> str:
    """The same dataset on a non-local file system (read through the node cache)."""
    fs = fsspec.filesystem("memory")
    root = f"/integrity-{os.getpid()}-{id(folder)}"
    for f in folder.iterdir():
        fs.pipe_file(f"{root}/{f.name}", f.read_bytes())
    yield f"memory://{root}"
    fs.rm(root, recursive=True)


def test_manifest_records_checksums_and_counts(folder: Path) -> None:
    assert LinesReader(str(folder)).save_manifest().endswith("_zephon_manifest.json")
    assert "checksum" not in json.loads((folder / "_zephon_manifest.json").read_text())["files"][0]
    where = LinesReader(str(folder), manifest=False).save_manifest(checksum=True)
    assert where.endswith("_zephon_manifest.json (with SHA-256 checksums)")
    files = json.loads((folder / "_zephon_manifest.json").read_text())["files"]
    assert [(f["path"], f["samples"]) for f in files] == [("a.txt", 10), ("b.txt", 10)]
    assert files[0]["checksum"] == checksum_of(str(folder / "a.txt"))
    (folder / "a.txt").write_text("changed\n")
    LinesReader(str(folder), manifest=False).save_manifest()  # re-indexed without --checksum: still checksummed
    files = json.loads((folder / "_zephon_manifest.json").read_text())["files"]
    assert files[0]["checksum"] == checksum_of(str(folder / "a.txt")) and files[0]["samples"] == 1


def test_sample_counts_are_held_to_the_manifest(folder: Path) -> None:
    LinesReader(str(folder)).save_manifest()
    (folder / "a.txt").write_text("".join(f"A{i}\n" for i in range(9)) + "x\n" + "\n")  # same size, 11 lines
    assert (folder / "a.txt").stat().st_size == 30
    with pytest.raises(ReaderError, match=r"a\.txt: has 11 samples, _zephon_manifest\.json says 10: the file changed"):
        LinesReader(str(folder)).shards()


def test_verify_checksum_local_file_checked_when_first_opened(folder: Path) -> None:
    LinesReader(str(folder)).save_manifest(checksum=True)
    data = bytearray((folder / "a.txt").read_bytes())
    data[4] ^= 1  # "a1" -> "a0": still decodes, silently different
    (folder / "a.txt").write_bytes(bytes(data))
    assert LinesReader(str(folder)).read(0, np.array([1])) == [{"line": "a0"}]  # what verify is for
    reader = LinesReader(str(folder), verify="checksum")
    with pytest.raises(ReaderError, match=r"a\.txt: content checksum mismatch: expected sha256:\w+ \(from `zephon index`\), actual sha256:\w+"):
        reader.read(0, np.array([1]))
    assert reader.read(1, np.array([0])) == [{"line": "b0"}]


def test_verify_checksum_remote_file_checked_once_per_node(remote: str, _cache: Path) -> None:
    LinesReader(remote).save_manifest(checksum=True)
    reader = LinesReader(remote, verify="checksum")
    assert reader.read(0, np.array([2])) == [{"line": "a2"}]
    markers = list((_cache / "shards").glob("*.checked"))
    assert len(markers) == 1  # the next process trusts the marker instead of hashing again
    clone = pickle.loads(pickle.dumps(reader))
    assert clone.read(0, np.array([3])) == [{"line": "a3"}]


def test_verify_checksum_remote_source_corrupt_names_the_url(remote: str) -> None:
    LinesReader(remote).save_manifest(checksum=True)
    fs = fsspec.filesystem("memory")
    path = remote.removeprefix("memory://") + "/a.txt"
    data = bytearray(fs.cat_file(path))
    data[4] ^= 1
    fs.pipe_file(path, bytes(data))
    reader = LinesReader(remote, verify="checksum")
    with pytest.raises(ReaderError, match=r"memory://.*/a\.txt: content checksum mismatch"):
        reader.read(0, np.array([1]))


def test_verify_checksum_heals_a_bad_cached_copy(remote: str, _cache: Path) -> None:
    """A cached copy damaged before anyone checked it is discarded and downloaded again."""
    LinesReader(remote).save_manifest(checksum=True)
    plain = LinesReader(remote)
    assert plain.read(0, np.array([1])) == [{"line": "a1"}]
    plain.close()
    plain._open.clear()
    (copy,) = [p for p in (_cache / "shards").iterdir() if p.name.endswith("a.txt")]
    data = bytearray(copy.read_bytes())
    data[4] ^= 1
    copy.write_bytes(bytes(data))
    checked = LinesReader(remote, verify="checksum")
    assert checked.read(0, np.array([1])) == [{"line": "a1"}]


def test_verify_needs_checksums_and_a_known_value(folder: Path) -> None:
    with pytest.raises(ReaderError, match=r"verify='checksum' but there is no _zephon_manifest\.json"):
        LinesReader(str(folder), verify="checksum").files()
    with pytest.raises(ReaderError, match=r"verify='checksum' needs a folder dataset"):
        LinesReader(str(folder / "a.txt"), verify="checksum").files()
    with pytest.raises(ConfigError, match=r"lines reader: verify must be 'checksum' or None, got 'crc'"):
        LinesReader(str(folder), verify="crc")


def test_shard_cache_check_marker_and_eviction(tmp_path: Path) -> None:
    cache = ShardCache(str(tmp_path / "c"), max_bytes=10)
    runs: list[str] = []

    def check(path: str) -> None:
        runs.append(path)

    with cache.acquire("k", lambda tmp: Path(tmp).write_bytes(b"12345678"), what="x") as entry:
        assert cache.check("k", "sum1", check) and not cache.check("k", "sum1", check)
        assert cache.check("k", "sum2", check)  # another expected value: checked again
        assert [e for e, _ in cache.entries()] == ["k"] and cache.usage() == 8
        assert entry.path == runs[0]
    with cache.acquire("j", lambda tmp: Path(tmp).write_bytes(b"12345678"), what="y"):
        pass  # over the byte limit: "k" (unpinned, least recently used) is evicted with its marker
    assert not (tmp_path / "c" / "k").exists() and not (tmp_path / "c" / "k.checked").exists()


def test_on_error_skip_returns_none_for_exactly_the_bad_records(folder: Path) -> None:
    reader = LinesReader(str(folder), on_error="skip", max_bad_fraction=0.5)
    rows = reader.read_or_skip(1, np.array([0, 3, 5, 4, 3]))
    assert rows == [{"line": "b0"}, None, {"line": "b5"}, None, None]
    strict = LinesReader(str(folder))
    with pytest.raises(RecordError, match=r"b\.txt: line 3: does not decode"):
        strict.read_or_skip(1, np.array([0, 3]))


def test_max_bad_fraction_judged_over_what_was_read(folder: Path) -> None:
    reader = LinesReader(str(folder), on_error="skip")  # default 0.1; the dataset has 20 records
    reader.read_or_skip(0, np.arange(10))
    reader.read_or_skip(1, np.arange(3))  # 13 read, none bad: fewer than the whole dataset, not judged
    with pytest.raises(ReaderError, match=r"lines dataset .*: 3 of the 20 records read so far do not decode \(15%\), more than max_bad_fraction=0\.1"):
        reader.read_or_skip(1, np.arange(3, 10))
    ok = LinesReader(str(folder), on_error="skip", max_bad_fraction=0.2)
    ok.read_or_skip(0, np.arange(10))
    assert ok.read_or_skip(1, np.arange(10)).count(None) == 3


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"on_error": "ignore"}, r"on_error must be one of \['raise', 'skip'\]"),
        ({"max_bad_fraction": 0.5}, "max_bad_fraction applies only with on_error='skip'"),
        ({"on_error": "skip", "max_bad_fraction": 2}, r"max_bad_fraction must be a number in \[0, 1\]"),
        ({"on_error": "skip", "max_bad_fraction": True}, r"max_bad_fraction must be a number in \[0, 1\]"),
    ],
)
def test_integrity_options_are_checked(folder: Path, options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        LinesReader(str(folder), **options)


def test_validate_reports_each_bad_record(folder: Path) -> None:
    result = validate(LinesReader(str(folder)), jobs=1)
    assert (result.files, result.records, result.bad_records, result.bad_files) == (2, 20, 3, 0)
    assert [b.line().rsplit("/", 1)[-1] for b in result.bad] == [
        "b.txt: line 3: does not decode",
        "b.txt: line 4: does not decode",
        "b.txt: line 7: does not decode",
    ]


class _Runs(MemoryReader):
    """Records 2..5 of shard 0 fail with the same message (like a corrupt row group)."""

    def read(self, shard: int, indices: np.ndarray) -> list[dict[str, Any]]:
        if shard == 0 and any(2 <= i <= 5 for i in indices.tolist()):
            raise RecordError("shard 0: row group 1 cannot be decoded")
        return super().read(shard, indices)


def test_validate_any_reader_and_merge_identical_runs() -> None:
    reader = _Runs([{"x": i} for i in range(20)], shard_size=10)
    result = validate(reader, jobs=1)
    (bad,) = result.bad
    assert (bad.first, bad.count) == (2, 4)
    assert bad.line() == "shard 0: row group 1 cannot be decoded (4 records: 2-5)"


def test_open_verified_leaves_nothing_pinned_on_mismatch(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.txt").write_text("hello\n")
    st = Storage(str(tmp_path / "d"))
    info = st.info("a.txt")
    with pytest.raises(ReaderError, match="content checksum mismatch"):
        open_verified(st, info, "sha256:" + "0" * 64)
    local = open_verified(st, info, checksum_of(str(tmp_path / "d" / "a.txt")))
    assert Path(local.path).read_text() == "hello\n"
    local.release()


# -- the `zephon index` command with a format registered in code ----------------------------------
def _old_builder(path: str) -> str:
    """An index builder written before checksums existed: it takes the path only."""
    return "indexed"


def _new_builder(path: str, *, checksum: bool = False) -> str:
    return LinesReader(path, manifest=False).save_manifest(checksum=checksum)


def _manager(index: Any) -> Any:
    import types

    from zephon_core import hookimpl
    from zephon_core.plugins import ZephonPluginManager

    @hookimpl
    def zephon_register_readers(register: Any) -> None:
        register(name="lines", factory=LinesReader, detect=TEXT.detect, index=index, description="lines")

    mod = types.ModuleType("lines_plugin")
    mod.zephon_register_readers = zephon_register_readers  # type: ignore[attr-defined]
    from zephon_storage import plugin as storage_commands  # `zephon index` is this package's command

    return ZephonPluginManager(load_entrypoints=False, plugins=[mod, storage_commands])


def test_cli_index_checksum_and_validate(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from zephon_core.cli import main

    assert main(["index", str(folder), "--checksum"], plugins=_manager(_new_builder)) == 0
    assert "checksum" in json.loads((folder / "_zephon_manifest.json").read_text())["files"][1]
    capsys.readouterr()
    assert main(["index", str(folder), "--validate", "--jobs", "1"], plugins=_manager(_new_builder)) == 1
    out = capsys.readouterr().out
    assert "b.txt: line 7: does not decode" in out
    assert "validated 2 file(s), 20 record(s): 3 bad record(s), 0 unreadable file(s)" in out
    (folder / "b.txt").write_text("".join(f"b{i}\n" for i in range(10)))
    assert main(["index", str(folder), "--validate", "--jobs", "1"], plugins=_manager(_new_builder)) == 0
    assert "validated 2 file(s), 20 record(s): all 20 records read; no field payload decoded" in capsys.readouterr().out


def test_cli_index_checksum_needs_a_builder_that_takes_it(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from zephon_core.cli import main

    assert main(["index", str(folder)], plugins=_manager(_old_builder)) == 0  # old builders still work
    assert main(["index", str(folder), "--checksum"], plugins=_manager(_old_builder)) == 2
    assert "its index builder takes no checksum= argument" in capsys.readouterr().err
