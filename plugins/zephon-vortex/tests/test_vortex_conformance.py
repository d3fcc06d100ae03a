"""The kernel's reader conformance suite on vortex files written by the format's own writer."""

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


class TestVortexConformance(ReaderConformance):
    @pytest.fixture(autouse=True)
    def _cache(self, tmp_path, monkeypatch):
        monkeypatch.setenv("ZEPHON_CACHE_DIR", str(tmp_path / "zephon-cache"))

    @pytest.fixture
    def reader_path(self, tmp_path):
        import pyarrow as pa
        import vortex as vx

        folder = tmp_path / "ds"
        folder.mkdir()
        for k, recs in enumerate(SHARDS):
            vx.io.write(vx.array(pa.Table.from_pylist(recs)), str(folder / f"part-{k}.vortex"))
        from zephon_vortex.index import build_index

        build_index(str(folder))  # `zephon index`: the manifest lets a missing shard be detected
        return str(folder)

    @pytest.fixture
    def reader_format(self):
        return "vortex"

    @pytest.fixture
    def expected_samples(self):
        return SHARDS
