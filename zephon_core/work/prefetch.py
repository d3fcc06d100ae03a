"""Prefetch that follows the shuffle: readers warm exactly the shards a lane's next chunks will read.

:class:`Lookahead` wraps the feeder's source and keeps each lane's next :data:`LOOKAHEAD_CHUNKS` chunks
computed, warming their shards through readers that can (:class:`~zephon_core.work.readers.PrefetchingReader`);
one computed under an older plan (:class:`~zephon_core.work.contract.PlanVersioned`) is never handed
out. docs/shuffling.md says why the work source, not file order, decides."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from zephon_core.work.contract import Chunk, PlanVersioned, WorkSource
from zephon_core.work.dataset import Dataset
from zephon_core.work.readers import PrefetchingReader, Reader, prefetches

LOOKAHEAD_CHUNKS = 8
"""How many of a lane's next chunks are announced to its readers ahead of being read."""


def with_lookahead(source: WorkSource, num_lanes: int) -> WorkSource:
    """``source`` wrapped in a :class:`Lookahead` when some dataset's reader can prefetch, else ``source``."""
    readers: list[PrefetchingReader | None] = [
        d.reader if isinstance(d, Dataset) and prefetches(d.reader) else None for d in source.datasets
    ]
    return Lookahead(source, num_lanes, readers) if any(r is not None for r in readers) else source


def stop_prefetch(source: WorkSource) -> None:
    """Stop the background prefetch of every dataset's reader (a closed pipeline leaves no thread behind);
    the reader may outlive the pipeline and serve the next one, whose prefetch starts them again."""
    for d in source.datasets:
        if isinstance(d, Dataset) and isinstance(d.reader, Reader):
            d.reader.stop_prefetch()


class Lookahead:
    """A work source proxy for one feeder thread (see the module docstring); everything else is delegated."""

    def __init__(self, source: WorkSource, num_lanes: int, readers: Sequence[PrefetchingReader | None]) -> None:
        self._source, self._lanes = source, num_lanes
        self._readers = list(readers)
        self._early: dict[int, tuple[Any, Chunk | None]] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._source, name)

    @property
    def datasets(self) -> Sequence[Any]:
        return self._source.datasets

    def chunk(self, number: int) -> Chunk | None:
        """Chunk ``number`` (computed early if it was), then prefetch for the lane's next several: announcing
        only the next gives a distant store milliseconds to answer. Each is computed once, entering the horizon."""
        version = self._source.plan_version if isinstance(self._source, PlanVersioned) else None
        early = self._early.pop(number, None)
        chunk = early[1] if early is not None and early[0] == version else self._source.chunk(number)
        if chunk is not None:
            for k in range(1, LOOKAHEAD_CHUNKS + 1):
                ahead = number + k * self._lanes
                known = self._early.get(ahead)
                if known is None or known[0] != version:
                    known = self._early[ahead] = (version, self._source.chunk(ahead))
                    if known[1] is not None:
                        self.prefetch(known[1])
                if known[1] is None:
                    break
        return chunk

    def prefetch(self, chunk: Chunk) -> None:
        """Ask each prefetching reader to warm the shards ``chunk`` reads."""
        need: dict[int, set[int]] = {}
        for d, s in zip(chunk.dataset.tolist(), chunk.shard.tolist()):
            need.setdefault(d, set()).add(s)
        for d, shards in sorted(need.items()):
            reader = self._readers[d]
            if reader is not None:
                reader.prefetch(sorted(shards))
