"""{{ cookiecutter.class_name }}: one CSV file (with a header row) per shard.

Sample counts and checksums come from the index written by ``zephon index PATH`` (see index.py);
without it the reader scans each file once. A shard whose size or checksum disagrees with the
index, or whose rows do not parse, is a ReaderError naming the file.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import threading
from typing import Any

import fsspec
import numpy as np

from zephon_core import Reader, ReaderError, ShardInfo

INDEX = "_zephon_csv_index.json"


def detect(fs: Any, root: str, files: list[str]) -> bool:
    """A folder of .csv files, or one .csv file."""
    return any(f.endswith(".csv") for f in files)


def parse(name: str, data: bytes) -> list[dict[str, str]]:
    """All rows of one CSV file; a damaged file is an error naming it."""
    if data and not data.endswith(b"\n"):
        raise ReaderError(f"csv shard {name}: file is truncated (no final newline)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ReaderError(f"csv shard {name}: not UTF-8 ({exc})") from None
    rows = list(csv.reader(io.StringIO(text, newline="")))
    if not rows:
        raise ReaderError(f"csv shard {name}: empty file (no header)")
    header, body = rows[0], rows[1:]
    for i, row in enumerate(body):
        if len(row) != len(header):
            raise ReaderError(f"csv shard {name}: row {i} has {len(row)} fields, header has {len(header)}")
    return [dict(zip(header, row)) for row in body]


class {{ cookiecutter.class_name }}(Reader):
    """Reads a folder of CSV files (local path or fsspec URL)."""

    format = "{{ cookiecutter.name }}"

    def __init__(self, path: str, storage_options: dict[str, Any] | None = None) -> None:
        self.path = path
        self.storage_options = storage_options or {}
        self._fs, self._root = fsspec.core.url_to_fs(path, **self.storage_options)
        self._lock = threading.Lock()
        self._cache: tuple[int, list[dict[str, str]]] | None = None
        self._shards: list[ShardInfo] | None = None
        self._index: dict[str, Any] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "storage_options": self.storage_options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["path"], state["storage_options"])  # type: ignore[misc]

    def _files(self) -> list[str]:
        if self._fs.isdir(self._root):
            return sorted(self._fs.relpath(f, self._root) if hasattr(self._fs, "relpath") else f[len(self._root) :].lstrip("/")
                          for f in self._fs.find(self._root) if f.endswith(".csv"))
        return [self._root.rsplit("/", 1)[-1]]

    def _full(self, name: str) -> str:
        return self._root if not self._fs.isdir(self._root) else f"{self._root.rstrip('/')}/{name}"

    def _load_index(self) -> dict[str, Any] | None:
        path = f"{self._root.rstrip('/')}/{INDEX}"
        if not self._fs.isdir(self._root) or not self._fs.exists(path):
            return None
        try:
            return json.loads(self._fs.cat_file(path))
        except (OSError, ValueError) as exc:
            raise ReaderError(f"csv index {path}: unreadable ({exc})") from None

    def shards(self) -> list[ShardInfo]:
        if self._shards is None:
            self._index = self._load_index()
            names = self._files()
            if self._index is not None:
                missing = sorted(set(self._index["files"]) - set(names))
                if missing:
                    raise ReaderError(f"csv shard {missing[0]}: listed in {INDEX} but missing")
                self._shards = [ShardInfo(n, int(self._index["files"][n]["rows"])) for n in sorted(self._index["files"])]
            else:
                self._shards = [ShardInfo(n, len(parse(n, self._read_bytes(n)))) for n in names]
        return self._shards

    def _read_bytes(self, name: str) -> bytes:
        try:
            return self._fs.cat_file(self._full(name))
        except FileNotFoundError:
            raise ReaderError(f"csv shard {name}: file is missing") from None
        except OSError as exc:
            raise ReaderError(f"csv shard {name}: cannot read ({exc})") from None

    def _rows(self, shard: int) -> list[dict[str, str]]:
        with self._lock:
            if self._cache is not None and self._cache[0] == shard:
                return self._cache[1]
        name = self.shards()[shard].id
        data = self._read_bytes(name)
        if self._index is not None:
            meta = self._index["files"][name]
            if len(data) != meta["bytes"] or hashlib.sha256(data).hexdigest() != meta["sha256"]:
                raise ReaderError(f"csv shard {name}: contents differ from {INDEX} (truncated or corrupt)")
        rows = parse(name, data)
        if len(rows) != self.shards()[shard].num_samples:
            raise ReaderError(f"csv shard {name}: {len(rows)} rows, index says {self.shards()[shard].num_samples}")
        with self._lock:
            self._cache = (shard, rows)
        return rows

    def read(self, shard: int, indices: np.ndarray) -> list[dict[str, Any]]:
        rows = self._rows(shard)
        return [dict(rows[i]) for i in indices.tolist()]
