"""Registration with Zephon (found through the ``zephon`` entry point in pyproject.toml).

The demos register like any other plugin, through the ``zephon_register_demos`` hook, so they show
in ``zephon plugins`` with this package's name and version: ``text`` (the default of ``zephon
demo``) and ``kernel`` (``zephon demo --kernel``, which needs no reader or operator plugin). The
factories are lazy strings: listing plugins does not import pyarrow, the tokenizer or numpy.
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
    register(
        name="kernel",
        factory="zephon_demo.kernel:main",
        description="the kernel-only demo (zephon demo --kernel): byte tokens, an n-to-m stateful step, no plugins",
    )
