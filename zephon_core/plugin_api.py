"""The plugin API: every kernel name a plugin may build on, in one module.

Plugins (operators, readers, runners, demos, integrations) are written against this module, not
against the kernel's internal layout. The names listed in ``__all__`` follow the plugin contract
version :data:`~zephon_core.hookspecs.PLUGIN_CONTRACT`: within one contract major they keep their
meaning and signature, a minor only adds names, and removing or changing one is a new major (which
the kernel then refuses to load old plugins against, naming the plugin and both contracts).

A plugin imports the kernel through these modules only:

* ``zephon_core`` — the user-facing API (``Pipeline``, ``Dataset``, ``Operator``, ``Records``, the
  errors, ...);
* ``zephon_core.plugin_api`` — this module: the building blocks only plugins need;
* ``zephon_core.hookspecs`` — ``hookimpl`` and the ``register`` callback protocols;
* ``zephon_core.conformance`` and ``zephon_core.testing`` (and their submodules) — for the plugin's
  own tests.

Readers build on a library of their own, the storage toolkit ``zephon_storage`` (distribution
zephon-storage: ``FileReader``, ``Storage``, the manifest and sidecar-index helpers, and the reader
test kit ``zephon_storage.testing``); it is held to this same contract. The kernel's former
``zephon_core.storage`` still resolves its names there, lazily.

Every other kernel module (``zephon_core.ops.contract``, ``zephon_core.runtime.*``, ...) is internal:
it may be split, renamed or moved in any release, and a plugin importing it breaks without warning.
``tests/test_layers.py`` holds the first-party plugins and the plugin template to that rule.

The names are resolved lazily (module ``__getattr__``) so that ``import zephon_core.plugin_api``
imports no numerical library: a plugin's ``plugin.py`` can import it while ``zephon plugins`` lists
what is installed, and only the names actually used load the modules behind them.
"""

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
"""Where each name lives today: the one place to update when a kernel module moves."""

__all__ = [
    "AdoptsRecordedConfig",
    "CHUNK_BITS",
    "ChunkSize",
    "ChunkSizing",
    "ConfigError",
    "DEFAULT_WINDOW_TOKENS",
    "Diagnosis",
    "Emitted",
    "Exhausted",
    "FunctionOperator",
    "ItemFailure",
    "Lineage",
    "MapTransform",
    "OFFSET_BITS",
    "OperatorError",
    "PLUGIN_CONTRACT",
    "PassThrough",
    "Payload",
    "Progress",
    "Reader",
    "RecordFn",
    "ReportsState",
    "ShuffleBlockSize",
    "SourceInfo",
    "Ticker",
    "WorkerCrashedError",
    "WorkerFn",
    "ZephonError",
    "ZephonPluginManager",
    "apply_each",
    "callable_name",
    "check_block_size",
    "check_exhaustion",
    "check_token_estimates",
    "dataset_of",
    "datasets_of",
    "default_collate",
    "default_plugin_manager",
    "describe_block_size",
    "describe_exhaustion",
    "diagnose",
    "diff_definitions",
    "load_object",
    "locate_draws",
    "make_order",
    "mean_tokens",
    "mix64",
    "not_normalised",
    "split_sample_id",
    "splitmix64",
    "stable_hash64",
    "stable_name",
    "uniforms",
    "windowed",
]


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


if TYPE_CHECKING:
    from zephon_core.checkpoint.fingerprint import diff_definitions
    from zephon_core.defaults.operators.function_operator import FunctionOperator, RecordFn
    from zephon_core.defaults.operators.mapping import MapTransform, PassThrough
    from zephon_core.defaults.sources.exhaustion import Exhausted, check_exhaustion, describe_exhaustion
    from zephon_core.defaults.sources.mixture import not_normalised
    from zephon_core.defaults.sources.shuffle import (
        ShuffleBlockSize,
        check_block_size,
        describe_block_size,
        locate_draws,
        make_order,
    )
    from zephon_core.defaults.sources.static_mixture import check_token_estimates
    from zephon_core.errors import ConfigError, OperatorError, WorkerCrashedError, ZephonError
    from zephon_core.hashing import mix64, splitmix64, stable_hash64, uniforms
    from zephon_core.hookspecs import PLUGIN_CONTRACT
    from zephon_core.ops.contract import (
        AdoptsRecordedConfig,
        Emitted,
        ItemFailure,
        Lineage,
        Payload,
        ReportsState,
        WorkerFn,
        apply_each,
        callable_name,
        stable_name,
    )
    from zephon_core.plugins import ZephonPluginManager, default_plugin_manager, load_object
    from zephon_core.progress import Progress, Ticker
    from zephon_core.runtime.batch import default_collate
    from zephon_core.runtime.diagnose import Diagnosis, diagnose
    from zephon_core.runtime.metrics import windowed
    from zephon_core.work.chunking import DEFAULT_WINDOW_TOKENS, ChunkSize, ChunkSizing, mean_tokens
    from zephon_core.work.contract import SourceInfo
    from zephon_core.work.ids import CHUNK_BITS, OFFSET_BITS, dataset_of, datasets_of, split_sample_id
    from zephon_core.work.readers import Reader
