"""Fixtures for the zephon-litdata tests: the committed LitData datasets and their expected values.

The datasets under ``fixtures/data`` were written by ``litdata.optimize`` (see ``fixtures/make_fixtures.py``);
each ``<variant>.expected.json`` holds every sample as tagged JSON (:mod:`zephon_storage.testing.tagged`).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from zephon_storage.testing.fixtures import expected, node_cache, tagger, untagger  # noqa: F401 - fixtures


@pytest.fixture
def data_dir() -> Path:
    return Path(__file__).parent / "fixtures" / "data"
