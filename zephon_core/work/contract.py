"""The work-source contract: what to train on, as numbered chunks of sample pointers.

A work source does no payload I/O. It owns a table of datasets and answers one question: which
samples form chunk ``g``? Chunk ``g`` must be a pure function of the source's configuration (and of
its :meth:`~WorkSource.state_dict`, for sources whose plan can change during a run) and ``g``. That
is what makes lanes cheap and elastic: a lane owns chunks ``g ≡ lane (mod L)`` and computes any of
them directly, so resuming on another world size needs nothing but chunk numbers.

Implement :class:`WorkSource` (a protocol: any object with these members works) or subclass
:class:`BaseWorkSource`, which supplies everything but :meth:`~WorkSource.chunk` and
:meth:`~WorkSource.describe`. Operators never see the source: what they need about it travels as a
:class:`SourceInfo`, and each record's dataset travels inside its sample ids
(:func:`zephon_core.work.ids.dataset_of`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast, runtime_checkable

import numpy as np

from zephon_core.errors import CheckpointError, ConfigError
from zephon_core.work.ids import dataset_of, split_sample_id

if TYPE_CHECKING:
    from zephon_core.work.dataset import Dataset

MixingUnit = Literal["samples", "tokens"]


@dataclass(frozen=True, slots=True)
class Pointer:
    """One sample, identified without reading it."""

    dataset: str
    shard: int
    index: int


@dataclass(frozen=True, slots=True)
class Chunk:
    """Chunk ``number`` of the global sequence: parallel arrays of dataset number, shard and index.

    ``offset`` is the position of the first pointer within the chunk: a part of a chunk (see
    :meth:`part`) keeps the identity of its pointers.
    """

    number: int
    dataset: np.ndarray
    shard: np.ndarray
    index: np.ndarray
    offset: int = 0

    def __len__(self) -> int:
        return len(self.index)

    def part(self, start: int, stop: int) -> Chunk:
        """Pointers ``[start, stop)`` of this chunk, as a chunk that knows where they sit."""
        return Chunk(
            self.number, self.dataset[start:stop], self.shard[start:stop], self.index[start:stop], self.offset + start
        )


@dataclass(frozen=True, slots=True)
class SourceInfo:
    """What operators may know about the work source: dataset names and target shares, nothing live.

    Attributes:
        names: dataset names, indexed by dataset number (as in sample ids).
        shares: each dataset's target share, normalised to sum to 1, in ``unit``.
        unit: whether the shares are meant in samples or in tokens.
    """

    names: tuple[str, ...]
    shares: tuple[float, ...]
    unit: MixingUnit


@runtime_checkable
class WorkSource(Protocol):
    """What a :class:`~zephon_core.pipeline.Pipeline` needs from a source of work (see the module docstring)."""

    @property
    def datasets(self) -> Sequence[Dataset]:
        """The dataset table; a sample id's dataset number indexes it."""
        ...

    @property
    def mixing_unit(self) -> MixingUnit:
        """``"tokens"`` when weights are meant in tokens (the pipeline then calibrates token estimates)."""
        ...

    def chunk(self, number: int) -> Chunk | None:
        """Chunk ``number`` (a pure function of the configuration and ``number``), or None past the end."""
        ...

    def target_weights(self) -> dict[str, float]:
        """Each dataset's target share (summing to 1) in :attr:`mixing_unit`, for token-aware operators."""
        ...

    def with_token_estimates(self, tokens_per_sample: Mapping[str, float]) -> WorkSource:
        """A copy of this source that turns token weights into sample weights with these estimates."""
        ...

    def describe(self) -> dict[str, Any]:
        """JSON-able definition: hashed into the checkpoint fingerprint."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """JSON-able state that changes during a run (not positions: those live per lane)."""
        ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`; must validate fully before changing anything."""
        ...


REQUIRED = ("datasets", "mixing_unit", "chunk", "target_weights", "with_token_estimates", "describe")


def check_work_source(source: object) -> WorkSource:
    """Return ``source`` if it implements the contract; else a :class:`ConfigError` listing what it lacks."""
    missing = [m for m in (*REQUIRED, "state_dict", "load_state_dict") if not hasattr(source, m)]
    if missing:
        raise ConfigError(
            f"Pipeline needs a WorkSource; {type(source).__name__} lacks {', '.join(missing)} "
            "(subclass zephon_core.BaseWorkSource or implement zephon_core.WorkSource)"
        )
    return cast(WorkSource, source)


def source_info(source: WorkSource) -> SourceInfo:
    """The operator-facing summary of ``source``."""
    names = tuple(d.name for d in source.datasets)
    weights = source.target_weights()
    return SourceInfo(names, tuple(float(weights[n]) for n in names), source.mixing_unit)


class BaseWorkSource:
    """A convenient base for work sources: subclasses define ``chunk()`` and ``describe()``.

    Args:
        datasets: the dataset table (names must be unique).
    """

    def __init__(self, datasets: Sequence[Dataset]) -> None:
        self._datasets = list(datasets)
        if not self._datasets:
            raise ConfigError(f"{type(self).__name__} needs at least one dataset")
        names = [d.name for d in self._datasets]
        if len(set(names)) != len(names):
            raise ConfigError(f"dataset names must be unique, got {names}")

    @property
    def datasets(self) -> Sequence[Dataset]:
        return self._datasets

    @property
    def mixing_unit(self) -> MixingUnit:
        return "samples"

    def chunk(self, number: int) -> Chunk | None:
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        raise NotImplementedError

    def target_weights(self) -> dict[str, float]:
        """Default: proportional to dataset sizes."""
        total = sum(d.num_samples for d in self._datasets)
        return {d.name: d.num_samples / total for d in self._datasets}

    def with_token_estimates(self, tokens_per_sample: Mapping[str, float]) -> WorkSource:
        raise ConfigError(f"{type(self).__name__} does not mix by tokens")

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if state:
            raise CheckpointError(f"{type(self).__name__} keeps no state, but the checkpoint has {sorted(state)}")

    # -- answers built on chunk() ------------------------------------------------------------
    def dataset_index(self, sid: int) -> int:
        """The dataset number a sample id was drawn from (pure: read from the id)."""
        return dataset_of(sid)

    def pointers(self, chunk: Chunk) -> list[Pointer]:
        """Human-readable pointers of a chunk (for debugging and lineage answers)."""
        return [
            Pointer(self._datasets[d].name, s, i)
            for d, s, i in zip(chunk.dataset.tolist(), chunk.shard.tolist(), chunk.index.tolist())
        ]

    def pointer(self, sid: int) -> Pointer:
        """The pointer behind a sample id found in a batch's lineage."""
        return pointer_of(self, sid)

    def shards_for(self, chunks: Iterable[int]) -> dict[str, list[int]]:
        """The shards, per dataset name, that these chunks read (see :func:`shards_for`)."""
        return shards_for(self, chunks)


def shards_for(source: WorkSource, chunks: Iterable[int]) -> dict[str, list[int]]:
    """Which shards of which dataset the chunks numbered ``chunks`` need, sorted per dataset name.

    A pure function of the chunk numbers (chunks are), so a reader that caches remote files can
    prefetch exactly the files the next chunks will read instead of "the next N files by index",
    which a cross-shard shuffle makes useless. Chunks past the end of the data need nothing.
    """
    need: dict[int, set[int]] = {}
    for g in chunks:
        ch = source.chunk(g)
        if ch is None:
            continue
        for d, s in set(zip(ch.dataset.tolist(), ch.shard.tolist())):
            need.setdefault(d, set()).add(s)
    return {source.datasets[d].name: sorted(need[d]) for d in sorted(need)}


def pointer_of(source: WorkSource, sid: int) -> Pointer:
    """The pointer behind sample id ``sid`` of ``source`` (recomputes its chunk)."""
    g, off = split_sample_id(sid)
    ch = source.chunk(g)
    if ch is None or off >= len(ch):
        raise ConfigError(f"sample id {sid} (chunk {g}, offset {off}) is past the end of the data")
    return Pointer(source.datasets[int(ch.dataset[off])].name, int(ch.shard[off]), int(ch.index[off]))
