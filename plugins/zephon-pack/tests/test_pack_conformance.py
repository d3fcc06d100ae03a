"""The kernel's determinism conformance suite, run on ``pack_sequences`` (each algorithm)."""

from __future__ import annotations

import functools

import pytest
from zephon_pack import PackSequences

from zephon_core.conformance import OperatorConformance
from zephon_core.testing.packing import token_documents


class PackConformance(OperatorConformance):
    __test__ = False
    algorithm = "wrap"
    allow_split: bool | None = None

    @pytest.fixture
    def operator_factory(self):
        return functools.partial(
            PackSequences, 128, algorithm=self.algorithm, allow_split=self.allow_split, num_open_bins=4
        )

    @pytest.fixture
    def sample_records(self):
        return token_documents(480, seed=7, mean=40, longest=400)  # token arrays, as tokenize would give


class TestWrapConformance(PackConformance):
    algorithm = "wrap"


@pytest.mark.slow  # the bin logic is also covered by TestBestFitSplitConformance
class TestFirstFitConformance(PackConformance):
    algorithm = "first_fit"
    allow_split = False


class TestBestFitSplitConformance(PackConformance):
    algorithm = "best_fit"
    allow_split = True
