"""Per-test node cache; the shared helpers live in :mod:`zephon_webdataset.testing`."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def node_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cached copies and indexes of remote data go to a per-test cache, not ~/.cache."""
    monkeypatch.setenv("ZEPHON_CACHE_DIR", str(tmp_path / "zephon-cache"))
