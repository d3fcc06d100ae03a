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
    """Files holding a ``slow`` case run first, then the others, each group largest file first (the
    order within a file is kept).

    ``make test`` hands whole files to two xdist workers in this order (``--no-loadscope-reorder``;
    xdist's own reordering puts files with the most tests first, so the one-test files that take a
    minute, install-alone checks and the template round trip, ran last and left one worker idle for
    the last minutes). Long files first, short ones to fill the gaps, ends both workers together.
    """
    slow_files = {item.path for item in items if item.get_closest_marker("slow") is not None}
    counts: dict[object, int] = {}
    for item in items:
        counts[item.path] = counts.get(item.path, 0) + 1
    items[:] = sorted(items, key=lambda item: (item.path not in slow_files, -counts[item.path]))  # stable
