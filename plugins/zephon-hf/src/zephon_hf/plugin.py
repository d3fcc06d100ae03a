"""Registers the ``hf`` format with Zephon (lazy references: pyarrow is imported only when used)."""

from __future__ import annotations

from typing import Any

from zephon_core.hookspecs import hookimpl

ZEPHON_CONTRACT = (1, 0)
"""The zephon plugin contract this plugin is built for (the kernel refuses an incompatible one)."""


@hookimpl
def zephon_register_readers(register: Any) -> None:
    register(
        name="hf",
        factory="zephon_hf.reader:HFReader",
        detect="zephon_hf.detect:detect",
        index="zephon_hf.index:build_index",
        description="Hugging Face datasets on disk: save_to_disk Arrow folders, hub-style Parquet (config=, split=)",
    )
