"""Zephon: elastically deterministic, online data loading for foundation-model training.

The public API is re-exported here lazily, so ``import zephon_core`` imports nothing heavy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "Dataset": "zephon_core.work.dataset",
    "MixtureSpec": "zephon_core.defaults.sources.mixture",
    "StaticMixtureWorkSource": "zephon_core.defaults.sources.static_mixture",
    "ScheduledMixtureWorkSource": "zephon_core.work.scheduled",
    "MixtureSchedule": "zephon_core.work.schedule",
    "WorkSource": "zephon_core.work.contract",
    "BaseWorkSource": "zephon_core.work.contract",
    "SourceInfo": "zephon_core.work.contract",
    "Pointer": "zephon_core.work.contract",
    "Chunk": "zephon_core.work.contract",
    "LaneLayout": "zephon_core.work.lanes",
    "sample_id": "zephon_core.work.ids",
    "dataset_of": "zephon_core.work.ids",
    "Reader": "zephon_core.work.readers",
    "ShardInfo": "zephon_core.work.readers",
    "Pipeline": "zephon_core.pipeline",
    "Options": "zephon_core.pipeline",
    "SampleBatch": "zephon_core.runtime.types",
    "merge_checkpoints": "zephon_core.checkpoint",
    "save_rank_state": "zephon_core.checkpoint",
    "load_merged_state": "zephon_core.checkpoint",
    "Operator": "zephon_core.ops.contract",
    "Accumulator": "zephon_core.ops.contract",
    "Records": "zephon_core.ops.contract",
    "Work": "zephon_core.ops.contract",
    "Traits": "zephon_core.ops.contract",
    "Emit": "zephon_core.defaults.operators.stateful",
    "take_sources": "zephon_core.defaults.operators.stateful",
    "hookimpl": "zephon_core.hookspecs",
    "PLUGIN_CONTRACT": "zephon_core.hookspecs",
    "hash_arrays": "zephon_core.hashing",
    "hash_global_batch": "zephon_core.hashing",
    "ZephonError": "zephon_core.errors",
    "ConfigError": "zephon_core.errors",
    "PluginError": "zephon_core.errors",
    "ReaderError": "zephon_core.errors",
    "RecordError": "zephon_core.errors",
    "OperatorError": "zephon_core.errors",
    "CheckpointError": "zephon_core.errors",
    "WorkerCrashedError": "zephon_core.errors",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    mod = _EXPORTS.get(name)
    if mod is None:
        raise AttributeError(f"module 'zephon_core' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(mod), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:
    from zephon_core.checkpoint import load_merged_state, merge_checkpoints, save_rank_state
    from zephon_core.defaults.operators.stateful import Emit, take_sources
    from zephon_core.defaults.sources.mixture import MixtureSpec
    from zephon_core.defaults.sources.static_mixture import StaticMixtureWorkSource
    from zephon_core.errors import (
        CheckpointError,
        ConfigError,
        OperatorError,
        PluginError,
        ReaderError,
        RecordError,
        WorkerCrashedError,
        ZephonError,
    )
    from zephon_core.hashing import hash_arrays, hash_global_batch
    from zephon_core.hookspecs import PLUGIN_CONTRACT, hookimpl
    from zephon_core.ops.contract import Accumulator, Operator, Records, Traits, Work
    from zephon_core.pipeline import Options, Pipeline
    from zephon_core.runtime.types import SampleBatch
    from zephon_core.work.contract import BaseWorkSource, Chunk, Pointer, SourceInfo, WorkSource
    from zephon_core.work.dataset import Dataset
    from zephon_core.work.ids import dataset_of, sample_id
    from zephon_core.work.lanes import LaneLayout
    from zephon_core.work.readers import Reader, ShardInfo
    from zephon_core.work.schedule import MixtureSchedule
    from zephon_core.work.scheduled import ScheduledMixtureWorkSource
