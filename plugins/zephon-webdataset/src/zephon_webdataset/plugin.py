"""Registers the ``webdataset`` format with Zephon (lazy references: nothing is imported until used)."""

from __future__ import annotations

from typing import Any

from zephon_core.hookspecs import hookimpl

ZEPHON_CONTRACT = (1, 0)
"""The zephon plugin contract this plugin is built for (the kernel refuses an incompatible one)."""


@hookimpl
def zephon_register_readers(register: Any) -> None:
    register(
        name="webdataset",
        factory="zephon_webdataset.reader:WebDatasetReader",
        detect="zephon_webdataset.detect:detect",
        index="zephon_webdataset.index:build_index",
        description="WebDataset tar shards (.tar) with a header-only sample index and ranged reads",
    )
