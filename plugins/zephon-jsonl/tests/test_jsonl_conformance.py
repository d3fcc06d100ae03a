"""The kernel's reader conformance suite on jsonl files written by the format's own writer."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.corpus import documents  # noqa: E402
from tests.readerkit import split  # noqa: E402
from zephon_core.conformance import ReaderConformance  # noqa: E402

SHARDS = split(documents(limit=360), [100, 140, 120])


def _write(folder: Path) -> None:
    import gzip
    import json

    folder.mkdir()
    for k, recs in enumerate(SHARDS):
        data = "".join(json.dumps(r) + "\n" for r in recs).encode()
        if k == 1:
            (folder / f"part-{k}.jsonl.gz").write_bytes(gzip.compress(data))
        else:
            (folder / f"part-{k}.jsonl").write_bytes(data)


class TestJsonlConformance(ReaderConformance):
    @pytest.fixture(autouse=True)
    def _cache(self, tmp_path, monkeypatch):
        monkeypatch.setenv("ZEPHON_CACHE_DIR", str(tmp_path / "zephon-cache"))

    @pytest.fixture
    def reader_path(self, tmp_path):
        _write(tmp_path / "ds")
        return str(tmp_path / "ds")

    @pytest.fixture
    def reader_format(self):
        return "jsonl"

    @pytest.fixture
    def expected_samples(self):
        return SHARDS
