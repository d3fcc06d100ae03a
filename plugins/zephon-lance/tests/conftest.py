"""Shared fixtures: Lance datasets written by pylance's own writer (``lance.write_dataset``).

Helpers are handed out as fixtures: under ``--import-mode=importlib`` (the repository's setting)
test modules cannot import ``conftest``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest


def write_shards(path: Path, shards: list[list[dict]]) -> None:
    """One fragment per shard, in order: the first written, the others appended (one commit each)."""
    import lance

    for k, rows in enumerate(shards):
        lance.write_dataset(pa.Table.from_pylist(rows), str(path), mode="create" if k == 0 else "append")


@pytest.fixture(autouse=True)
def cache_env(tmp_path, monkeypatch):
    monkeypatch.setenv("ZEPHON_CACHE_DIR", str(tmp_path / "zephon-cache"))


@pytest.fixture(scope="session")
def write_lance() -> Callable[[Path, list[list[dict]]], None]:
    """:func:`write_shards`: one fragment per shard."""
    return write_shards
