"""Registration with Zephon (found through the ``zephon`` entry point in pyproject.toml).

The demo registers like any other plugin, through the ``zephon_register_demos`` hook, so it shows
in ``zephon plugins`` with this package's name and version. The factory is a lazy string:
listing plugins does not import pyarrow or the tokenizer.
"""

from __future__ import annotations

from zephon_core.hookspecs import DemoRegister, hookimpl

ZEPHON_CONTRACT = (1, 0)
"""The zephon plugin contract this plugin is built for (the kernel refuses an incompatible one)."""


@hookimpl
def zephon_register_demos(register: DemoRegister) -> None:
    register(
        name="text",
        factory="zephon_demo.text:main",
        description="Parquet + JSONL, tokenize, pack to 2048, token-aware 70:30 mixing, determinism self-check",
    )
