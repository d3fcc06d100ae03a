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

    The files that use the Ray instance of ``contrib/zephon-ray/tests/conftest.py`` run back to back
    (among the slow files, as one unit of their combined size): that conftest stops Ray when the next
    test is another package's, so scattered they started it six or seven times (about 10 s each on
    2 cores); together each worker starts it once.
    """
    slow_files = {item.path for item in items if item.get_closest_marker("slow") is not None}
    counts: dict[object, int] = {}
    for item in items:
        counts[item.path] = counts.get(item.path, 0) + 1
    on_ray = {item.path for item in items if "ray_session" in getattr(item, "fixturenames", ())}
    on_ray_tests = sum(counts[path] for path in on_ray)

    def order(item: pytest.Item) -> tuple[bool, int, bool, int]:
        if item.path in on_ray:
            return (False, -on_ray_tests, False, -counts[item.path])
        return (item.path not in slow_files, -counts[item.path], True, 0)

    items[:] = sorted(items, key=order)  # stable: the order within a file is kept
