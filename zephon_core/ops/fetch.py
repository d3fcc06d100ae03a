"""``fetch``: the implicit first operator, which turns chunks of pointers into records.

The accumulator gives every pointer its identity (its sample id) and lineage; the worker groups
a chunk's pointers by (dataset, shard) and reads each group with one ``Reader.read`` call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from zephon_core.errors import ConfigError, ReaderError, ZephonError
from zephon_core.ops.contract import Accumulator, Emitted, Operator, Payload, Traits, Work, WorkerFn
from zephon_core.work.readers import Reader
from zephon_core.work.source import Chunk


class _FetchAccumulator(Accumulator):
    def push(self, chunk: Chunk) -> list[Emitted]:  # type: ignore[override]
        base = chunk.number << 16
        keys = list(range(base, base + len(chunk)))
        return [Work((chunk.dataset, chunk.shard, chunk.index), keys, [(k,) for k in keys])]


@dataclass(frozen=True)
class FetchWorker:
    """Reads a chunk's samples, one reader call per (dataset, shard) group."""

    names: tuple[str, ...]
    readers: tuple[Reader, ...]

    def __call__(self, task: tuple[np.ndarray, np.ndarray, np.ndarray]) -> list[Payload]:
        ds, shard, index = task
        out: list[Any] = [None] * len(index)
        group = ds.astype(np.int64) << 40 | shard
        order = np.argsort(group, kind="stable")
        bounds = np.flatnonzero(np.diff(group[order])) + 1
        for pos in np.split(order, bounds):
            d, s = int(ds[pos[0]]), int(shard[pos[0]])
            reader = self.readers[d]
            try:
                rows = reader.read(s, index[pos])
            except ZephonError:
                raise
            except Exception as exc:
                raise ReaderError(
                    f"dataset {self.names[d]!r}, shard {s} ({_shard_name(reader, s)}): {type(exc).__name__}: {exc}"
                ) from exc
            if len(rows) != len(pos):
                raise ReaderError(
                    f"dataset {self.names[d]!r}, shard {s}: reader returned {len(rows)} samples for {len(pos)} indices"
                )
            for p, row in zip(pos.tolist(), rows):
                out[p] = row
        return out


def _shard_name(reader: Reader, s: int) -> str:
    try:
        return reader.shards()[s].id
    except Exception:
        return "?"


class Fetch(Operator):
    """Resolves pointers into payloads; configured with ``Pipeline.fetch(parallelism=..., runner=...)``."""

    kind = "fetch"
    traits = Traits(fanout="one")

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self._worker: FetchWorker | None = None

    def bind(self, names: list[str], readers: list[Reader]) -> None:
        self._worker = FetchWorker(tuple(names), tuple(readers))

    def config(self) -> dict[str, Any]:
        return {}

    def new_accumulator(self, lane: int) -> Accumulator:
        return _FetchAccumulator()

    def worker(self) -> WorkerFn:
        if self._worker is None:
            raise ConfigError("fetch operator used before its datasets were bound")
        return self._worker
