"""Registration with Zephon (found through the ``zephon`` entry point in pyproject.toml).

The factory is a lazy string: listing plugins imports neither the vision stack nor pyarrow.
"""

from __future__ import annotations

from zephon_core.hookspecs import DemoRegister, hookimpl

ZEPHON_CONTRACT = (1, 0)
"""The zephon plugin contract this plugin is built for (the kernel refuses an incompatible one)."""


@hookimpl
def zephon_register_demos(register: DemoRegister) -> None:
    register(
        name="vlm",
        factory="zephon_vlm_demo.vlm:main",
        description="captioned photographs (WebDataset, Parquet, LitData): decode, augment, patchify, tokenize, "
        "multimodal packing, determinism self-check",
    )
