"""Fixtures for the zephon-mds tests: the committed MDS fixtures and their expected values.

The datasets under ``fixtures/data`` were written by ``streaming.MDSWriter`` (see
``fixtures/make_fixtures.py``); each ``<variant>.expected.json`` holds every sample as tagged JSON.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pytest

DATA = Path(__file__).parent / "fixtures" / "data"
READABLE = ("plain", "zstd", "gz")


def tag(value: Any) -> Any:
    """Plain JSON for a decoded value (the same rules as ``make_fixtures.tag``)."""
    if isinstance(value, dict):
        return {str(k): tag(v) for k, v in value.items()}
    if isinstance(value, list):
        return [tag(v) for v in value]
    if isinstance(value, tuple):
        return {"$tuple": [tag(v) for v in value]}
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"$bytes": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, np.ndarray):
        return {"$ndarray": value.tolist(), "dtype": str(value.dtype), "shape": list(value.shape)}
    if isinstance(value, np.generic):
        return {"$scalar": value.item(), "dtype": str(value.dtype)}
    if isinstance(value, Decimal):
        return {"$decimal": str(value)}
    return value


def untag(value: Any) -> Any:
    """The Python value a tagged JSON value stands for (inverse of :func:`tag`)."""
    if isinstance(value, list):
        return [untag(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "$bytes" in value:
        return base64.b64decode(value["$bytes"])
    if "$ndarray" in value:
        return np.array(value["$ndarray"], dtype=value["dtype"]).reshape(value["shape"])
    if "$scalar" in value:
        return np.dtype(value["dtype"]).type(value["$scalar"])
    if "$decimal" in value:
        return Decimal(value["$decimal"])
    if "$tuple" in value:
        return tuple(untag(v) for v in value["$tuple"])
    return {k: untag(v) for k, v in value.items()}


def load_expected(variant: str) -> dict[str, Any]:
    """``{"samples": [...]}`` for a fixture variant."""
    return json.loads((DATA / f"{variant}.expected.json").read_text())


@pytest.fixture(autouse=True)
def _node_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Decompressed shard copies go to a per-session cache, not the user's ~/.cache."""
    monkeypatch.setenv("ZEPHON_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "zephon-cache"))


@pytest.fixture
def data_dir() -> Path:
    return DATA


@pytest.fixture
def tagger() -> Callable[[Any], Any]:
    return tag


@pytest.fixture
def expected() -> Callable[[str], dict[str, Any]]:
    return load_expected


@pytest.fixture
def untagger() -> Callable[[Any], Any]:
    return untag
