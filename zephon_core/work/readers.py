"""The contract a format plugin implements, and the kernel's own in-memory reader.

A reader turns sample pointers ``(shard, index)`` into payload dicts. The fetch stage calls
:meth:`Reader.read` once per shard of a chunk, so a reader can decode a row group or a byte range
once for many samples. Readers are sent to worker processes, so they must pickle cheaply: keep
configuration in the object and (re)open files lazily."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from zephon_core.errors import ReaderError


@dataclass(frozen=True, slots=True)
class ShardInfo:
    """One shard of a dataset: a stable id (usually its path relative to the dataset root) and size."""

    id: str
    num_samples: int


class Reader(ABC):
    """Reads one dataset stored in one format. Subclasses set :attr:`format` and implement
    :meth:`shards` and :meth:`read`. ``shards()`` must be deterministic (same list, same order, same
    counts every time) because pointers index into it."""

    format: ClassVar[str] = ""

    @abstractmethod
    def shards(self) -> list[ShardInfo]:
        """All shards, in a stable order, with their sample counts."""

    @abstractmethod
    def read(self, shard: int, indices: np.ndarray) -> list[dict[str, Any]]:
        """Read the samples ``indices`` (any order, repeats allowed) of shard number ``shard``. Returns
        one dict per index, in the order of ``indices``. Raise :class:`ReaderError` naming the shard
        on missing, truncated or corrupt data."""

    def describe(self) -> dict[str, Any]:
        """JSON-able description that goes into the pipeline fingerprint."""
        return {"format": self.format}

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release open files or caches (optional)."""

    def stop_prefetch(self) -> None:  # noqa: B027 - optional hook
        """Stop background prefetch threads (the pipeline calls it when it closes); a later
        :meth:`prefetch` may start them again, so the reader must stay usable."""

    def prefetch(self, shards: Sequence[int]) -> None:  # noqa: B027 - optional hook
        """Start warming these shards in the background (default: nothing to warm). The pipeline calls
        it with exactly the shards a lane's next chunks will read (:mod:`zephon_core.work.prefetch`).
        It must not block, nor raise for a shard it cannot warm."""


@runtime_checkable
class SkippingReader(Protocol):
    """A reader capability: read samples, giving ``None`` for each record it was told to skip. When the
    kernel uses it: the fetch stage reads through :meth:`read_or_skip` instead of :meth:`Reader.read`,
    and turns each ``None`` into a tombstone (counted in ``Pipeline.stats()["skipped_records"]``). The
    reader decides which records it skips (a ``StorageReader`` with ``on_error="skip"``: those that do
    not decode) and raises for the rest."""

    def read_or_skip(self, shard: int, indices: np.ndarray) -> list[dict[str, Any] | None]:
        """Like :meth:`Reader.read`, with ``None`` in place of each skipped record."""


@runtime_checkable
class PrefetchingReader(Protocol):
    """A reader capability: warm shards in the background before the fetch stage reads them. When the
    kernel uses it: the feeder computes each lane's next chunks early and calls :meth:`prefetch` with
    the shards they read (:mod:`zephon_core.work.prefetch`); a closing pipeline calls
    :meth:`Reader.stop_prefetch`. A :class:`Reader` subclass has it when it overrides
    :meth:`Reader.prefetch` (see :func:`prefetches`)."""

    def prefetch(self, shards: Sequence[int]) -> None:
        """Start warming ``shards``; must not block, and must not raise for a shard it cannot warm."""


def prefetches(reader: object) -> bool:
    """Whether ``reader`` has the :class:`PrefetchingReader` capability (a Reader that overrides ``prefetch``)."""
    if not isinstance(reader, PrefetchingReader):
        return False
    return not isinstance(reader, Reader) or type(reader).prefetch is not Reader.prefetch


@runtime_checkable
class SharesRows(Protocol):
    """A reader capability: hand out the rows it stores, not copies. When the kernel uses it: the fetch
    stage reads through :meth:`read_shared` instead of :meth:`Reader.read` when nothing after it can
    change a row (no operator, a collation that only reads), saving a copy per record. The rows must
    stay unchanged for the reader's life. :class:`MemoryReader` has it."""

    def read_shared(self, shard: int, indices: np.ndarray) -> list[dict[str, Any]]:
        """Like :meth:`Reader.read`, but the stored rows themselves."""


class MemoryReader(Reader):
    """Records held in memory, cut into shards of ``shard_size``: the kernel's own reader."""

    format = "memory"

    def __init__(self, records: Sequence[dict[str, Any]], shard_size: int) -> None:
        if shard_size <= 0:
            raise ReaderError(f"shard_size must be positive, got {shard_size}")
        # Plain dicts, so a read copies each with ``dict.copy`` (half the cost of ``dict(r)``).
        self._records = [r if type(r) is dict else dict(r) for r in records]
        self._shard_size = shard_size

    def shards(self) -> list[ShardInfo]:
        n, s = len(self._records), self._shard_size
        return [ShardInfo(f"memory-{i:05d}", min(s, n - i * s)) for i in range((n + s - 1) // s)]

    def read(self, shard: int, indices: np.ndarray) -> list[dict[str, Any]]:
        base = shard * self._shard_size
        recs = self._records
        try:
            return [recs[base + i].copy() for i in indices.tolist()]  # a copy: a map may change its row
        except IndexError as exc:
            raise ReaderError(f"memory shard {shard}: index out of range ({exc})") from None

    def read_shared(self, shard: int, indices: np.ndarray) -> list[dict[str, Any]]:
        """Like :meth:`read`, but the stored rows themselves: for a reader of rows that changes none.
        The fetch stage reads this way only when nothing after it can change a row (no operator, the
        default collation): the copy :meth:`read` makes would be pure cost. A subclass that
        overrides :meth:`read` is read through it."""
        if type(self).read is not MemoryReader.read:
            return self.read(shard, indices)
        base = shard * self._shard_size
        try:
            return list(map(self._records.__getitem__, (indices + base).tolist()))
        except IndexError as exc:
            raise ReaderError(f"memory shard {shard}: index out of range ({exc})") from None

    def describe(self) -> dict[str, Any]:
        return {"format": self.format, "shard_size": self._shard_size, "n": len(self._records)}
