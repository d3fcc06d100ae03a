"""The kernel's reader conformance suite, run on plain, zstd and gzip MDS datasets."""

from __future__ import annotations

from typing import Any

import pytest

from zephon_core.conformance import ReaderCapabilities, ReaderConformance


class _MDS(ReaderConformance):
    __test__ = False
    variant = ""
    options: dict[str, Any] = {}  # noqa: RUF012 - read-only class configuration
    corruption = False

    @pytest.fixture
    def reader_path(self, data_dir):
        return str(data_dir / self.variant)

    @pytest.fixture
    def reader_format(self):
        return "mds"

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


class TestPlain(_MDS):
    variant = "plain"


class TestZstdVerified(_MDS):
    """The zstd fixture was written with ``hashes=["sha1"]``: with verification, corruption is caught."""

    variant = "zstd"
    options = {"verify_hashes": True}  # noqa: RUF012
    corruption = True


class TestGzip(_MDS):
    variant = "gz"
