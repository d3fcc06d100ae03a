"""Registers the ``mds`` format with Zephon (lazy references: nothing is imported until used)."""

from __future__ import annotations

from typing import Any

from zephon_core.hookspecs import hookimpl

ZEPHON_CONTRACT = (1, 0)
"""The zephon plugin contract this plugin is built for (the kernel refuses an incompatible one)."""


@hookimpl
def zephon_register_readers(register: Any) -> None:
    register(
        name="mds",
        factory="zephon_mds.reader:MDSReader",
        detect="zephon_mds.detect:detect",
        index="zephon_mds.index:build_index",
        description="Mosaic Streaming MDS shards (index.json + .mds, optionally .zstd/.gz/.bz2), read without torch",
    )
