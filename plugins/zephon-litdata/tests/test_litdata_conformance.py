"""The kernel's reader conformance suite, run on every LitData layout the fixtures cover."""

from __future__ import annotations

from typing import Any

import pytest

from zephon_core.conformance import ReaderCapabilities, ReaderConformance


class _LitData(ReaderConformance):
    __test__ = False
    variant = ""
    options: dict[str, Any] = {}  # noqa: RUF012 - read-only class configuration
    corruption = False

    @pytest.fixture
    def reader_path(self, data_dir):
        return str(data_dir / self.variant)

    @pytest.fixture
    def reader_format(self):
        return "litdata"

    @pytest.fixture
    def reader_options(self):
        return dict(self.options)

    @pytest.fixture
    def reader_capabilities(self):
        return ReaderCapabilities(detects_corruption=self.corruption)

    @pytest.fixture
    def expected_samples(self, reader_path, make_reader, expected, untagger):
        flat = [untagger(s) for s in expected(self.variant)["samples"]]
        out, start = [], 0
        for info in make_reader(reader_path).shards():
            out.append(flat[start : start + info.num_samples])
            start += info.num_samples
        assert start == len(flat)
        return out


class TestArrowRows(_LitData):
    variant = "arrow_rows"


class TestArrowRowsZstd(_LitData):
    variant = "arrow_rows_zstd"


class TestPytree(_LitData):
    variant = "pytree"


class TestPytreeZstdBatch(_LitData):
    variant = "pytree_zstd_batch"


class TestPytreeZstdChunk(_LitData):
    variant = "pytree_zstd_chunk"


class TestPytreeZstdSample(_LitData):
    variant = "pytree_zstd_sample"


class TestTokens(_LitData):
    variant = "tokens"
    options = {"block_size": 8}  # noqa: RUF012
