"""The plugin API: every kernel name a plugin may build on, in one module.

Plugins are written against this module (with ``zephon_core``, ``zephon_core.hookspecs`` and, for
their tests, ``zephon_core.conformance`` and ``zephon_core.testing``), not against the kernel's
layout: every other kernel module is internal and may move in any release
(``tests/test_layers.py`` holds the first-party plugins to that). The names in ``__all__`` follow
:data:`~zephon_core.hookspecs.PLUGIN_CONTRACT`; docs/reference/plugin-api.md says what each is for.

The names are resolved lazily (module ``__getattr__``) so that ``import zephon_core.plugin_api``
imports no numerical library: ``zephon plugins`` can list a plugin without loading what it uses."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "AdoptsRecordedConfig": "zephon_core.ops.contract",
    "CHUNK_BITS": "zephon_core.work.ids",
    "ChunkSize": "zephon_core.work.chunking",
    "ChunkSizing": "zephon_core.work.chunking",
    "ConfigError": "zephon_core.errors",
    "DEFAULT_WINDOW_TOKENS": "zephon_core.work.chunking",
    "Diagnosis": "zephon_core.runtime.diagnose",
    "Emitted": "zephon_core.ops.contract",
    "Exhausted": "zephon_core.defaults.sources.exhaustion",
    "FunctionOperator": "zephon_core.defaults.operators.function_operator",
    "ItemFailure": "zephon_core.ops.contract",
    "Lineage": "zephon_core.ops.contract",
    "MapTransform": "zephon_core.defaults.operators.mapping",
    "OFFSET_BITS": "zephon_core.work.ids",
    "OperatorError": "zephon_core.errors",
    "PLUGIN_CONTRACT": "zephon_core.hookspecs",
    "PassThrough": "zephon_core.defaults.operators.mapping",
    "Payload": "zephon_core.ops.contract",
    "Progress": "zephon_core.progress",
    "Reader": "zephon_core.work.readers",
    "RecordFn": "zephon_core.defaults.operators.function_operator",
    "ReportsState": "zephon_core.ops.contract",
    "ShuffleBlockSize": "zephon_core.defaults.sources.shuffle",
    "SourceInfo": "zephon_core.work.contract",
    "Ticker": "zephon_core.progress",
    "WorkerCrashedError": "zephon_core.errors",
    "WorkerFn": "zephon_core.ops.contract",
    "ZephonError": "zephon_core.errors",
    "ZephonPluginManager": "zephon_core.plugins",
    "apply_each": "zephon_core.ops.contract",
    "callable_name": "zephon_core.ops.contract",
    "check_block_size": "zephon_core.defaults.sources.shuffle",
    "check_exhaustion": "zephon_core.defaults.sources.exhaustion",
    "check_token_estimates": "zephon_core.defaults.sources.static_mixture",
    "dataset_of": "zephon_core.work.ids",
    "split_sample_id": "zephon_core.work.ids",
    "datasets_of": "zephon_core.work.ids",
    "default_collate": "zephon_core.runtime.batch",
    "default_plugin_manager": "zephon_core.plugins",
    "describe_block_size": "zephon_core.defaults.sources.shuffle",
    "diff_definitions": "zephon_core.checkpoint.fingerprint",
    "describe_exhaustion": "zephon_core.defaults.sources.exhaustion",
    "diagnose": "zephon_core.runtime.diagnose",
    "load_object": "zephon_core.plugins",
    "locate_draws": "zephon_core.defaults.sources.shuffle",
    "make_order": "zephon_core.defaults.sources.shuffle",
    "mean_tokens": "zephon_core.work.chunking",
    "mix64": "zephon_core.hashing",
    "not_normalised": "zephon_core.defaults.sources.mixture",
    "splitmix64": "zephon_core.hashing",
    "stable_name": "zephon_core.ops.contract",
    "stable_hash64": "zephon_core.hashing",
    "uniforms": "zephon_core.hashing",
    "windowed": "zephon_core.runtime.metrics",
}
"""Where each name lives today: the one place to update when a kernel module moves (and the
``TYPE_CHECKING`` imports at the end, which type checkers read instead)."""

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    """Import the module behind ``name`` on first use, and keep the value for the next lookup."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(
            f"module 'zephon_core.plugin_api' has no attribute {name!r}; the plugin API is: {', '.join(__all__)}"
        )
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names too, although they are not loaded yet (for ``dir()`` and completion)."""
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # "X as X" marks each a re-export, since type checkers cannot read a computed __all__
    from zephon_core.checkpoint.fingerprint import diff_definitions as diff_definitions
    from zephon_core.defaults.operators.function_operator import FunctionOperator as FunctionOperator
    from zephon_core.defaults.operators.function_operator import RecordFn as RecordFn
    from zephon_core.defaults.operators.mapping import MapTransform as MapTransform
    from zephon_core.defaults.operators.mapping import PassThrough as PassThrough
    from zephon_core.defaults.sources.exhaustion import Exhausted as Exhausted
    from zephon_core.defaults.sources.exhaustion import check_exhaustion as check_exhaustion
    from zephon_core.defaults.sources.exhaustion import describe_exhaustion as describe_exhaustion
    from zephon_core.defaults.sources.mixture import not_normalised as not_normalised
    from zephon_core.defaults.sources.shuffle import ShuffleBlockSize as ShuffleBlockSize
    from zephon_core.defaults.sources.shuffle import check_block_size as check_block_size
    from zephon_core.defaults.sources.shuffle import describe_block_size as describe_block_size
    from zephon_core.defaults.sources.shuffle import locate_draws as locate_draws
    from zephon_core.defaults.sources.shuffle import make_order as make_order
    from zephon_core.defaults.sources.static_mixture import check_token_estimates as check_token_estimates
    from zephon_core.errors import ConfigError as ConfigError
    from zephon_core.errors import OperatorError as OperatorError
    from zephon_core.errors import WorkerCrashedError as WorkerCrashedError
    from zephon_core.errors import ZephonError as ZephonError
    from zephon_core.hashing import mix64 as mix64
    from zephon_core.hashing import splitmix64 as splitmix64
    from zephon_core.hashing import stable_hash64 as stable_hash64
    from zephon_core.hashing import uniforms as uniforms
    from zephon_core.hookspecs import PLUGIN_CONTRACT as PLUGIN_CONTRACT
    from zephon_core.ops.contract import AdoptsRecordedConfig as AdoptsRecordedConfig
    from zephon_core.ops.contract import Emitted as Emitted
    from zephon_core.ops.contract import ItemFailure as ItemFailure
    from zephon_core.ops.contract import Lineage as Lineage
    from zephon_core.ops.contract import Payload as Payload
    from zephon_core.ops.contract import ReportsState as ReportsState
    from zephon_core.ops.contract import WorkerFn as WorkerFn
    from zephon_core.ops.contract import apply_each as apply_each
    from zephon_core.ops.contract import callable_name as callable_name
    from zephon_core.ops.contract import stable_name as stable_name
    from zephon_core.plugins import ZephonPluginManager as ZephonPluginManager
    from zephon_core.plugins import default_plugin_manager as default_plugin_manager
    from zephon_core.plugins import load_object as load_object
    from zephon_core.progress import Progress as Progress
    from zephon_core.progress import Ticker as Ticker
    from zephon_core.runtime.batch import default_collate as default_collate
    from zephon_core.runtime.diagnose import Diagnosis as Diagnosis
    from zephon_core.runtime.diagnose import diagnose as diagnose
    from zephon_core.runtime.metrics import windowed as windowed
    from zephon_core.work.chunking import DEFAULT_WINDOW_TOKENS as DEFAULT_WINDOW_TOKENS
    from zephon_core.work.chunking import ChunkSize as ChunkSize
    from zephon_core.work.chunking import ChunkSizing as ChunkSizing
    from zephon_core.work.chunking import mean_tokens as mean_tokens
    from zephon_core.work.contract import SourceInfo as SourceInfo
    from zephon_core.work.ids import CHUNK_BITS as CHUNK_BITS
    from zephon_core.work.ids import OFFSET_BITS as OFFSET_BITS
    from zephon_core.work.ids import dataset_of as dataset_of
    from zephon_core.work.ids import datasets_of as datasets_of
    from zephon_core.work.ids import split_sample_id as split_sample_id
    from zephon_core.work.readers import Reader as Reader
