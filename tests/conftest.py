"""Shared fixtures for the kernel and end-to-end tests."""

from __future__ import annotations

import os
import tempfile

import pytest

# litdata, torch and Ray write into these; keep them inside the test session's temp area.
os.environ.setdefault("TMPDIR", tempfile.gettempdir())


@pytest.fixture(scope="session")
def demo_source():
    from zephon_core.demo import make_source

    return make_source(chunk_size=32)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Files holding a ``slow`` case run first (the order within a file is kept).

    ``make test`` hands whole files to two xdist workers in collection order, and ``contrib/`` (torch
    ranks, Ray clusters, demos) is collected last: its long files used to start when the other
    worker had nothing left, leaving one core idle for the last five minutes of the run.
    """
    slow_files = {item.path for item in items if item.get_closest_marker("slow") is not None}
    items[:] = sorted(items, key=lambda item: item.path not in slow_files)  # sorted() is stable
