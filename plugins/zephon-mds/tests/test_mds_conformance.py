"""The kernel's reader conformance suite, run on plain, zstd and gzip MDS datasets."""

from __future__ import annotations

from zephon_storage.testing.fixtures import FixtureConformance


class _MDS(FixtureConformance):
    __test__ = False
    dataset_format = "mds"


class TestPlain(_MDS):
    variant = "plain"


class TestZstdVerified(_MDS):
    """The zstd fixture was written with ``hashes=["sha1"]``: with verification, corruption is caught."""

    variant = "zstd"
    options = {"verify_hashes": True}  # noqa: RUF012
    corruption = True


class TestGzip(_MDS):
    variant = "gz"
