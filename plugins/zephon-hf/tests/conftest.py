"""Fixtures for zephon-hf: the ``datasets`` library, offline, with its caches in temporary folders.

Test data is written by ``datasets`` itself (``Dataset.from_list`` + ``save_to_disk`` /
``to_parquet``), so the reader is checked against what users actually have on disk. Nothing may
touch the network or the user's Hugging Face cache: the environment says offline and points every
cache at a temporary folder before ``datasets`` is imported, and ``datasets.config`` is patched too
in case another test module imported it first.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from zephon_core.testing.corpus import documents

OFFLINE = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_DISABLE_PROGRESS_BARS": "1"}


@pytest.fixture(scope="session")
def hf_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``HF_HOME`` for the session: an empty temporary folder."""
    return tmp_path_factory.mktemp("hf-home")


@pytest.fixture(scope="session")
def hf(hf_home: Path) -> Any:
    """The ``datasets`` module, offline, caching under :func:`hf_home` (the test extra installs it)."""
    env = {**OFFLINE, "HF_HOME": str(hf_home), "HF_DATASETS_CACHE": str(hf_home / "datasets")}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    datasets = pytest.importorskip("datasets")
    config = datasets.config
    saved = {k: getattr(config, k, None) for k in ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE", "HF_DATASETS_CACHE")}
    config.HF_DATASETS_OFFLINE = True
    config.HF_HUB_OFFLINE = True
    config.HF_DATASETS_CACHE = hf_home / "datasets"
    datasets.disable_progress_bars()
    yield datasets
    for k, v in saved.items():
        setattr(config, k, v)
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(autouse=True)
def _zephon_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A node cache per test, and no network for anything that reads the environment late."""
    monkeypatch.setenv("ZEPHON_CACHE_DIR", str(tmp_path / "zephon-cache"))
    for k, v in OFFLINE.items():
        monkeypatch.setenv(k, v)


def nested_rows(n: int, offset: int = 0) -> list[dict[str, Any]]:
    """Corpus documents with a string, a list of ints, a list of strings and a struct column."""
    docs = documents(limit=offset + n)[offset:]
    return [
        {
            "id": d["id"],
            "text": d["text"],
            "tokens": [len(w) for w in d["text"].split()][:12],
            "words": d["text"].split()[:3],
            "meta": {"source": d["source"], "chars": len(d["text"])},
        }
        for d in docs
    ]


@pytest.fixture(scope="session")
def rows() -> list[dict[str, Any]]:
    """600 nested rows (see :func:`nested_rows`)."""
    return nested_rows(600)


@pytest.fixture(scope="session")
def make_rows() -> Any:
    """:func:`nested_rows` itself, for tests that need other counts (tests cannot import conftest)."""
    return nested_rows
