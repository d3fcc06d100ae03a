"""Entry point of the ``zephon`` plugin group: registers ``tokenize``, ``tokenize_chat`` and ``ensure_mixture``.

Factories are lazy ``"module:attr"`` strings so that ``import zephon_core`` (and listing plugins)
never imports ``tokenizers`` or ``jinja2``.
"""

from __future__ import annotations

from typing import Any

from zephon_core.hookspecs import hookimpl

ZEPHON_CONTRACT = (1, 0)
"""The zephon plugin contract this plugin is built for (the kernel refuses an incompatible one)."""


@hookimpl
def zephon_register_operators(register: Any) -> None:
    register(
        name="tokenize",
        factory="zephon_tokenize.operator:Tokenize",
        description="text -> input_ids with HF tokenizers (offline; batch encoding on workers)",
    )
    register(
        name="tokenize_chat",
        factory="zephon_tokenize.chat:TokenizeChat",
        description="conversations -> input_ids + assistant-only loss_mask with a Hugging Face chat template",
    )
    register(
        name="ensure_mixture",
        factory="zephon_tokenize.mixture:EnsureMixture",
        description="per-lane reordering so each window of output matches the mixture in tokens",
    )
