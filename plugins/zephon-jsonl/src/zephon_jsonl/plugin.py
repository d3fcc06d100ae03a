"""Registers the ``jsonl`` format with Zephon (lazy references: nothing is imported until used)."""

from __future__ import annotations

from typing import Any

from zephon_core.hookspecs import hookimpl


@hookimpl
def zephon_register_readers(register: Any) -> None:
    register(
        name="jsonl",
        factory="zephon_jsonl.reader:JsonlReader",
        detect="zephon_jsonl.detect:detect",
        index="zephon_jsonl.index:build_index",
        description="JSON Lines (.jsonl/.ndjson, optionally .gz/.zst) with a byte-offset index",
    )
