"""{{ cookiecutter.class_name }}: CSV files (with a header row), one shard per file.

The kernel's ``FileReader`` does the plumbing every format shares: listing (held to the manifest
``zephon index`` writes: a missing, extra or short file is an error naming it), options (an unknown
one is an error), pickling into worker processes, open files, content checksums
(``verify="checksum"``) and skipping records that do not decode (``on_error="skip"``). This module
only parses CSV: a damaged file is a ``ReaderError``, a damaged row a ``RecordError``.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from typing import Any

import numpy as np

from zephon_core import ReaderError, RecordError, ShardInfo
from zephon_storage import DataFiles, FileReader, in_request_order

FILES = DataFiles((".csv",), "CSV files (.csv)")
detect = FILES.detect  # the ``detect`` hook: a folder holding .csv files, or one .csv file

Table = tuple[list[str], list[list[str]]]
"""A parsed file: the header and the rows, as fields."""


def parse(name: str, data: bytes) -> Table:
    """The header and rows of one CSV file; a damaged file is an error naming it."""
    if data and not data.endswith(b"\n"):
        raise ReaderError(f"{name}: file is truncated (no final newline)")
    try:
        rows = list(csv.reader(io.StringIO(data.decode("utf-8"), newline="")))
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ReaderError(f"{name}: not a readable CSV file ({exc})") from None
    if not rows:
        raise ReaderError(f"{name}: empty file (no header)")
    return rows[0], rows[1:]


class {{ cookiecutter.class_name }}(FileReader):
    """Reads a folder (or one file) of CSV files, local or any fsspec URL; each row is one sample.

    Args:
        path: local path or fsspec URL of a folder or a single ``.csv`` file.
        open_files: parsed files kept per reader and process.
        manifest: hold the listing to ``_zephon_manifest.json`` when ``zephon index`` wrote one.
        **storage: storage options (``storage_options``, ``cache_dir``, ...) and ``verify``,
            ``on_error``, ``max_bad_fraction``; see ``zephon_storage.StorageReader``.
    """

    format = "{{ cookiecutter.name }}"
    data_files = FILES

    def __init__(self, path: str, *, open_files: int = 8, manifest: bool = True, **storage: Any) -> None:
        super().__init__(path, prefetch=0, open_files=open_files, manifest=manifest, storage=storage)
        self._counts: list[int] | None = None  # pickled with the reader: workers never count again
        self._init_runtime()

    def _parse(self, i: int) -> Table:
        local = self._local(i)  # a local copy (remote files are cached), checked with verify="checksum"
        try:
            with open(local.path, "rb") as f:
                return parse(self._name(i), f.read())
        finally:
            local.release()

    def _open_file(self, i: int) -> tuple[Table, Callable[[], None]]:
        table, listed = self._parse(i), self.shards()[i].num_samples
        if len(table[1]) != listed:
            raise ReaderError(f"{self._name(i)}: has {len(table[1])} rows, the dataset listed {listed}")
        return table, lambda: None

    def shards(self) -> list[ShardInfo]:
        """Row counts from the manifest when there is one (no file is read), else by parsing each file."""
        files, manifest = self.files(), self._manifest
        if self._counts is None:
            if manifest is not None:
                self._counts = [manifest[f.rel].samples for f in files]
            else:
                self._counts = [len(self._parse(i)[1]) for i in range(len(files))]
        return [ShardInfo(f.rel, n) for f, n in zip(files, self._counts)]

    def read(self, shard: int, indices: np.ndarray) -> list[dict[str, Any]]:
        self._check_shard(shard)
        header, rows = self._opened(shard)
        uniq, inv = np.unique(np.asarray(indices, dtype=np.int64), return_inverse=True)
        if len(uniq) and not 0 <= uniq[0] <= uniq[-1] < len(rows):
            raise ReaderError(f"{self._name(shard)}: row index out of range ({len(rows)} rows)")
        out = []
        for i in uniq.tolist():
            if len(rows[i]) != len(header):
                raise RecordError(f"{self._name(shard)}: row {i} has {len(rows[i])} fields, header has {len(header)}")
            out.append(dict(zip(header, rows[i])))
        return in_request_order(out, inv, len(indices))
