"""Prefetch that follows the shuffle: readers warm exactly the shards a lane's next chunk will read.

With a cross-shard shuffle, "the next N files by index" is the wrong guess: a lane's next chunk
reads a few files from anywhere in the dataset. The work source knows which ones, as a pure
function of the chunk number (:func:`~zephon_core.work.contract.shards_for`). :class:`Lookahead`
wraps the source the feeder reads: when it hands out chunk ``g`` it computes the same lane's next
chunks, ``g + lanes``, ``g + 2 * lanes``, ... (:data:`LOOKAHEAD_CHUNKS` of them), keeps them for when
they are asked for, and calls ``Reader.prefetch`` with the shards each reads. Only datasets whose reader has the
:class:`~zephon_core.work.readers.PrefetchingReader` capability (it overrides :meth:`Reader.prefetch`)
are asked, and without any such reader the source is used as it is.

Sources whose plan can change during a run (trainer-steered mixtures) expose a ``plan_version``
counter; a chunk computed early under an older plan is dropped, never handed out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from zephon_core.work.contract import Chunk, PlanVersioned, WorkSource
from zephon_core.work.dataset import Dataset
from zephon_core.work.readers import PrefetchingReader, Reader, prefetches

LOOKAHEAD_CHUNKS = 8
"""How many of a lane's next chunks are announced to its readers ahead of being read."""


def prefetching_readers(source: WorkSource) -> list[PrefetchingReader | None]:
    """Per dataset number: its reader if it has the :class:`PrefetchingReader` capability, else None."""
    return [d.reader if isinstance(d, Dataset) and prefetches(d.reader) else None for d in source.datasets]


def with_lookahead(source: WorkSource, num_lanes: int) -> WorkSource:
    """``source`` wrapped in a :class:`Lookahead` when some dataset's reader can prefetch, else ``source``."""
    readers = prefetching_readers(source)
    return Lookahead(source, num_lanes, readers) if any(r is not None for r in readers) else source


def stop_prefetch(source: WorkSource) -> None:
    """Stop the background prefetch of every dataset's reader (a closed pipeline leaves no thread behind).

    A reader (and its datasets) may outlive the pipeline and serve the next one; stopping only ends
    the threads, which the next prefetch starts again.
    """
    for d in source.datasets:
        if isinstance(d, Dataset) and isinstance(d.reader, Reader):
            d.reader.stop_prefetch()


class Lookahead:
    """A work source proxy for one feeder thread (see the module docstring); everything else is delegated."""

    def __init__(self, source: WorkSource, num_lanes: int, readers: Sequence[PrefetchingReader | None]) -> None:
        self._source = source
        self._lanes = num_lanes
        self._readers = list(readers)
        self._early: dict[int, tuple[Any, Chunk | None]] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._source, name)

    @property
    def datasets(self) -> Sequence[Any]:
        return self._source.datasets

    def _version(self) -> Any:
        return self._source.plan_version if isinstance(self._source, PlanVersioned) else None

    def chunk(self, number: int) -> Chunk | None:
        """Chunk ``number`` (computed early if it was), then prefetch for the lane's next chunks.

        The lane's next :data:`LOOKAHEAD_CHUNKS` chunks are kept announced: a chunk is read soon
        after the one before it, so announcing only the next one gives a distant store a few
        milliseconds to answer; announcing several gives it the time several chunks take to train.
        Each is computed once, when it first enters the horizon.
        """
        version = self._version()
        early = self._early.pop(number, None)
        chunk = early[1] if early is not None and early[0] == version else self._source.chunk(number)
        if chunk is not None:
            for k in range(1, LOOKAHEAD_CHUNKS + 1):
                ahead = number + k * self._lanes
                known = self._early.get(ahead)
                if known is not None and known[0] == version:
                    if known[1] is None:
                        break
                    continue
                nxt = self._source.chunk(ahead)
                self._early[ahead] = (version, nxt)
                if nxt is None:
                    break
                self.prefetch(nxt)
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

    def computed_early(self) -> Mapping[int, Chunk | None]:
        """The chunks computed early and not yet handed out (for tests and debugging)."""
        return {g: c for g, (_, c) in self._early.items()}
