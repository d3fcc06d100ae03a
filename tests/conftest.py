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
