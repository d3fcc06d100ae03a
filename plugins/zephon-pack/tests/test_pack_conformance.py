"""The kernel's determinism conformance suite, run on ``pack_sequences`` (each algorithm)."""

from __future__ import annotations

import pytest
from zephon_pack.testing import PackConformance


class TestWrapConformance(PackConformance):
    algorithm = "wrap"


@pytest.mark.slow  # the bin logic is also covered by TestBestFitSplitConformance
class TestFirstFitConformance(PackConformance):
    algorithm = "first_fit"
    allow_split = False


class TestBestFitSplitConformance(PackConformance):
    algorithm = "best_fit"
    allow_split = True
