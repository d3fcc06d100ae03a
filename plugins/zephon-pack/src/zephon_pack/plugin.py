"""Entry point of the ``zephon`` plugin group: registers ``pack_sequences`` (lazily)."""

from __future__ import annotations

from typing import Any

from zephon_core.hookspecs import hookimpl

ZEPHON_CONTRACT = (1, 0)
"""The zephon plugin contract this plugin is built for (the kernel refuses an incompatible one)."""


@hookimpl
def zephon_register_operators(register: Any) -> None:
    register(
        name="pack_sequences",
        factory="zephon_pack.operator:PackSequences",
        description="pack token sequences into fixed-length rows (wrap, first_fit, best_fit, best_fit_wrap)",
    )
