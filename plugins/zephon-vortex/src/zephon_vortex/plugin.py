"""Registers the ``vortex`` format with Zephon (lazy references: vortex is imported only when used)."""

from __future__ import annotations

from typing import Any

from zephon_core.hookspecs import hookimpl

ZEPHON_CONTRACT = (1, 0)
"""The zephon plugin contract this plugin is built for (the kernel refuses an incompatible one)."""


@hookimpl
def zephon_register_readers(register: Any) -> None:
    register(
        name="vortex",
        factory="zephon_vortex.reader:VortexReader",
        detect="zephon_vortex.detect:detect",
        index="zephon_vortex.index:build_index",
        description="Vortex columnar files (vortex-data), batched sorted takes",
    )
