"""Registers the ``lance`` format with Zephon (lazy references: lance is imported only when used)."""

from __future__ import annotations

from typing import Any

from zephon_core.hookspecs import hookimpl

ZEPHON_CONTRACT = (1, 0)
"""The plugin contract this package was built for (checked by the kernel when it loads the plugin)."""


@hookimpl
def zephon_register_readers(register: Any) -> None:
    register(
        name="lance",
        factory="zephon_lance.reader:LanceReader",
        detect="zephon_lance.detect:detect",
        description="Lance datasets (pylance): one shard per fragment at a pinned version, deletions honoured",
    )
