"""Registers the ``jsonl`` format with Zephon (lazy references: nothing is imported until used)."""

from __future__ import annotations

from typing import Any

from zephon_core.hookspecs import hookimpl

ZEPHON_CONTRACT = (1, 0)
"""The zephon plugin contract this plugin is built for (the kernel refuses an incompatible one)."""


@hookimpl
def zephon_register_readers(register: Any) -> None:
    register(
        name="jsonl",
        factory="zephon_jsonl.reader:JsonlReader",
        detect="zephon_jsonl.detect:detect",
        index="zephon_jsonl.index:build_index",
        description="JSON Lines (.jsonl/.ndjson, optionally .gz/.zst) with a byte-offset index",
    )
