"""Registers the ``litdata`` format with Zephon (lazy references: nothing is imported until used)."""

from __future__ import annotations

from typing import Any

from zephon_core.hookspecs import hookimpl

ZEPHON_CONTRACT = (1, 0)
"""The zephon plugin contract this plugin is built for (the kernel refuses an incompatible one)."""


@hookimpl
def zephon_register_readers(register: Any) -> None:
    register(
        name="litdata",
        factory="zephon_litdata.reader:LitDataReader",
        detect="zephon_litdata.detect:detect",
        index="zephon_litdata.index:build_index",
        description="LitData optimize() output (index.json + chunk .bin, zstd, Arrow rows), read without torch",
    )
