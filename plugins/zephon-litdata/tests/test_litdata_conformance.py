"""The kernel's reader conformance suite, run on every LitData layout the fixtures cover."""

from __future__ import annotations

from zephon_storage.testing.fixtures import FixtureConformance


class _LitData(FixtureConformance):
    __test__ = False
    dataset_format = "litdata"


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
