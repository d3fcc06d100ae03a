"""zephon-tokenize: online tokenization (plain text and chat), token-aware mixing calibration and ``ensure_mixture``.

Importing this package is cheap; ``tokenizers`` is imported when a tokenizer is resolved, ``jinja2``
when a chat template is compiled.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "Tokenize": "zephon_tokenize.operator",
    "TokenizeChat": "zephon_tokenize.chat",
    "ChatWorker": "zephon_tokenize.chat",
    "ChatTemplate": "zephon_tokenize.chat_template",
    "load_template": "zephon_tokenize.chat_template",
    "EnsureMixture": "zephon_tokenize.mixture",
    "TokenizeWorker": "zephon_tokenize.worker",
    "resolve_tokenizer": "zephon_tokenize.resolve",
    "gpt2_tokenizer": "zephon_tokenize.resolve",
    "estimate_tokens_per_sample": "zephon_tokenize.calibrate",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    mod = _EXPORTS.get(name)
    if mod is None:
        raise AttributeError(f"module 'zephon_tokenize' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(mod), name)


if TYPE_CHECKING:
    from zephon_tokenize.calibrate import estimate_tokens_per_sample
    from zephon_tokenize.chat import ChatWorker, TokenizeChat
    from zephon_tokenize.chat_template import ChatTemplate, load_template
    from zephon_tokenize.mixture import EnsureMixture
    from zephon_tokenize.operator import Tokenize
    from zephon_tokenize.resolve import gpt2_tokenizer, resolve_tokenizer
    from zephon_tokenize.worker import TokenizeWorker
