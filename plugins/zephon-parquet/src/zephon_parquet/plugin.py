"""Registers the ``parquet`` format with Zephon (lazy references: pyarrow is imported only when used)."""

from __future__ import annotations

from typing import Any

from zephon_core.hookspecs import hookimpl

ZEPHON_CONTRACT = (1, 0)
"""The zephon plugin contract this plugin is built for (the kernel refuses an incompatible one)."""


@hookimpl
def zephon_register_readers(register: Any) -> None:
    register(
        name="parquet",
        factory="zephon_parquet.reader:ParquetReader",
        detect="zephon_parquet.detect:detect",
        index="zephon_parquet.index:build_index",
        description="Apache Parquet (pyarrow), row groups decoded once and cached",
    )
