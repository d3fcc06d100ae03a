"""The kernel's determinism conformance suite, run on ``tokenize`` and ``ensure_mixture``."""

from __future__ import annotations

import functools
from typing import Any

import pytest
from zephon_tokenize import EnsureMixture, Tokenize

from zephon_core import Dataset, MixtureSpec, StaticMixtureWorkSource
from zephon_core.conformance import OperatorConformance
from zephon_core.conformance import samples as conformance_samples
from zephon_core.work.contract import source_info

SAMPLE_RECORDS = 160
"""Enough for every check: each of the suite's 4 lanes gets 40 records, more than a flush window (2
chunks of 16), and the every-cut-point resume on 2 lanes gets 79 global steps, so all its cuts (every
step of the first two windows, up to step 61) happen. The suite's default 480 only lengthens each of
its 40 replays to the end."""


class TestTokenizeConformance(OperatorConformance):
    @pytest.fixture
    def operator_factory(self):
        return functools.partial(Tokenize, "gpt2")

    @pytest.fixture
    def sample_records(self):
        return conformance_samples.text_records(SAMPLE_RECORDS)


@pytest.mark.slow
class TestTokenizeSplitConformance(OperatorConformance):
    """1→n: documents cut into pieces of at most 24 tokens."""

    @pytest.fixture
    def operator_factory(self):
        return functools.partial(Tokenize, "gpt2", max_length=24, split_long_samples=True, add_bos=True)

    @pytest.fixture
    def sample_records(self):
        return conformance_samples.text_records(SAMPLE_RECORDS)  # pieces: more global steps than Tokenize's


def conformance_source() -> StaticMixtureWorkSource:
    """The two-dataset source the suite builds its pipelines on (2:1, chunks of 16)."""
    recs = conformance_samples.text_records(SAMPLE_RECORDS)
    cut = (2 * len(recs)) // 3
    return StaticMixtureWorkSource(
        [
            Dataset.from_records("conformance_a", recs[:cut], shard_size=40),
            Dataset.from_records("conformance_b", recs[cut:], shard_size=40),
        ],
        mixture=MixtureSpec({"conformance_a": 2.0, "conformance_b": 1.0}),
        chunk_size=16,
        seed=11,
    )


def prepared_ensure_mixture(**kwargs: Any) -> EnsureMixture:
    """``ensure_mixture`` already given its source, so the suite's direct driver can use it too.

    In a pipeline ``Pipeline`` calls ``setup`` again with the summary of its own (identical) source.
    A small token bound makes the operator hold and reorder records within the suite's short windows.
    """
    op = EnsureMixture(unit="tokens", max_buffered=6, max_buffered_tokens=400, **kwargs)
    op.setup(source_info(conformance_source()))
    return op


class TestEnsureMixtureConformance(OperatorConformance):
    @pytest.fixture
    def operator_factory(self):
        return prepared_ensure_mixture

    @pytest.fixture
    def sample_records(self):
        return conformance_samples.text_records(SAMPLE_RECORDS)  # the records conformance_source() holds

    @pytest.fixture
    def upstream(self):
        return [functools.partial(Tokenize, "gpt2")]


@pytest.mark.slow
class TestEnsureMixtureMostBehindConformance(OperatorConformance):
    """The older ``release="most_behind"`` rule (still what 0.1 checkpoints resume with) holds records
    differently from the default, so it is held to the suite on its own."""

    @pytest.fixture
    def operator_factory(self):
        return functools.partial(prepared_ensure_mixture, release="most_behind")

    @pytest.fixture
    def sample_records(self):
        return conformance_samples.text_records(SAMPLE_RECORDS)  # the records conformance_source() holds

    @pytest.fixture
    def upstream(self):
        return [functools.partial(Tokenize, "gpt2")]
