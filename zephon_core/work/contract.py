"""The work-source contract: what to train on, as numbered chunks of sample pointers.

A work source does no payload I/O: chunk ``g`` is a pure function of its configuration (and state) and
``g``, so a lane computes any of its chunks directly and resuming on another world size needs nothing but
chunk numbers. Operators never see the source, only a :class:`SourceInfo`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast, runtime_checkable

import numpy as np

from zephon_core.errors import CheckpointError, ConfigError
from zephon_core.work.ids import dataset_of, split_sample_id

if TYPE_CHECKING:
    from zephon_core.defaults.sources.exhaustion import Exhausted
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
    """Chunk ``number`` of the global sequence: parallel arrays of dataset number, shard and index;
    ``offset`` is the first pointer's position, so a :meth:`part` keeps its pointers' identity."""

    number: int
    dataset: np.ndarray
    shard: np.ndarray
    index: np.ndarray
    offset: int = 0

    def __len__(self) -> int:
        return len(self.index)

    def part(self, start: int, stop: int) -> Chunk:
        """Pointers ``[start, stop)`` of this chunk, as a chunk that knows where they sit."""
        cut = slice(start, stop)
        return Chunk(self.number, self.dataset[cut], self.shard[cut], self.index[cut], self.offset + start)


@dataclass(frozen=True, slots=True)
class SourceInfo:
    """What operators may know about the work source: dataset names and target shares, nothing live.

    Attributes:
        names: dataset names, indexed by dataset number (as in sample ids).
        shares: each dataset's target share, normalised to sum to 1, in ``unit``.
        unit: whether the shares are meant in samples or in tokens."""

    names: tuple[str, ...]
    shares: tuple[float, ...]
    unit: MixingUnit


@runtime_checkable
class WorkSource(Protocol):
    """What a :class:`~zephon_core.pipeline.Pipeline` needs from a source of work (see the module docstring)."""

    @property
    def datasets(self) -> Sequence[Dataset]:
        """The dataset table; a sample id's dataset number indexes it."""

    @property
    def mixing_unit(self) -> MixingUnit:
        """``"tokens"`` when weights are meant in tokens (the pipeline then calibrates token estimates)."""

    def chunk(self, number: int) -> Chunk | None:
        """Chunk ``number`` (a pure function of the configuration and ``number``), or None past the end."""

    def target_weights(self) -> dict[str, float]:
        """Each dataset's target share (summing to 1) in :attr:`mixing_unit`, for token-aware operators."""

    def with_token_estimates(self, tokens_per_sample: Mapping[str, float]) -> WorkSource:
        """A copy of this source that turns token weights into sample weights with these estimates."""

    def describe(self) -> dict[str, Any]:
        """JSON-able definition: hashed into the checkpoint fingerprint."""

    def state_dict(self) -> dict[str, Any]:
        """JSON-able state that changes during a run (not positions: those live per lane)."""

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`; must validate fully before changing anything."""


# -- optional capabilities --------------------------------------------------------------------------
@runtime_checkable
class TokenSized(Protocol):
    """A source that sizes its chunks in tokens, so it wants token estimates even when mixing by samples.

    ``Pipeline.calibrate()`` passes frozen estimates to :meth:`~WorkSource.with_token_estimates`: ``"required"``
    makes a pipeline without a tokenizer an error, ``"optional"`` calibrates if there is one, None never."""

    @property
    def token_estimates_use(self) -> Literal["required", "optional"] | None:
        """Whether sizing chunks needs token estimates (see the class docstring)."""


@runtime_checkable
class TokenEstimated(Protocol):
    """A source that may carry frozen tokens-per-sample estimates given by the user, used instead of
    asking the operators when calibrating; None means "measure"."""

    @property
    def tokens_per_sample(self) -> Mapping[str, float] | None:
        """Tokens per sample of each dataset, by name, or None."""


@runtime_checkable
class LaneBound(Protocol):
    """A source whose chunks depend on the number of lanes: the pipeline runs ``with_lanes(lanes)``
    instead (anew when ``lanes`` changes). It needs ``lane_assignment="modulo"``."""

    def with_lanes(self, num_lanes: int) -> WorkSource:
        """A copy bound to ``num_lanes`` lanes (the number is in the fingerprint already)."""


@runtime_checkable
class Windowed(Protocol):
    """A source whose chunks depend on the window, e.g. ``chunk_size="auto"``: the pipeline runs
    ``with_window(k)`` instead, ``k`` being the resolved ``flush_every_k_chunks`` (anew when it changes)."""

    def with_window(self, flush_every_k_chunks: int) -> WorkSource:
        """A copy bound to windows of ``flush_every_k_chunks`` chunks."""


@runtime_checkable
class Steerable(Protocol):
    """A source whose mixture the training loop may change: ``Pipeline.update_mixture(weights)`` passes
    on, per lane, the lane-local chunk from which it applies, and the feeder never runs ahead of it."""

    @property
    def update_lead_windows(self) -> int:
        """Windows after a lane's resume window that an update takes effect (>= 1)."""

    def update_mixture(self, weights: Mapping[str, float], effects: Mapping[int, int], step: int | None = None) -> None:
        """From lane-local chunk ``effects[lane]`` on, lane ``lane`` mixes by ``weights``; recorded for checkpoints."""


@runtime_checkable
class PlanVersioned(Protocol):
    """A source whose plan can change: prefetch keeps a chunk computed early only while :attr:`plan_version` holds."""

    @property
    def plan_version(self) -> int:
        """Changes (e.g. grows by one) whenever chunks not yet handed out may change."""


@runtime_checkable
class LaneStateful(Protocol):
    """A source with per-lane state, kept in each lane's checkpoint entry (so it survives a new world size)
    and restored after :meth:`~WorkSource.load_state_dict` (``{}`` for a lane with none)."""

    def lane_state_dict(self, lane: int) -> dict[str, Any]:
        """JSON-able state of lane ``lane``."""

    def load_lane_state_dicts(self, states: Mapping[int, Any]) -> None:
        """Restore every lane's :meth:`lane_state_dict` (validated fully before anything changes)."""


@runtime_checkable
class ReportsExhaustion(Protocol):
    """A source that can say which dataset ran out where, for ``Pipeline.stats()["exhausted"]``."""

    def exhaustion_report(self, lanes: Iterable[int] | None = None) -> list[Exhausted]:
        """Which dataset ran out at which draw, for these lanes (None: all)."""


@runtime_checkable
class Paced(Protocol):
    """A gate (wrapped around a :class:`Steerable` source) by which the feeder feeds only lanes whose next
    chunk ``may_compute`` allows; it changes only timing, never which chunks a lane gets."""

    def may_compute(self, number: int) -> bool:
        """Whether chunk ``number`` may be computed now."""


def check_work_source(source: object) -> WorkSource:
    """Return ``source`` if it implements the contract; else a :class:`ConfigError` listing what it lacks."""
    members = ("datasets", "mixing_unit", "chunk", "target_weights", "with_token_estimates", "describe", "state_dict")
    missing = [m for m in (*members, "load_state_dict") if not hasattr(source, m)]
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
    """A base for work sources over ``datasets`` (unique names): subclasses define ``chunk()`` and ``describe()``."""

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

    def dataset_index(self, sid: int) -> int:
        """The dataset number a sample id was drawn from (pure: read from the id)."""
        return dataset_of(sid)

    def pointers(self, chunk: Chunk) -> list[Pointer]:
        """Human-readable pointers of a chunk (for debugging and lineage answers)."""
        columns = zip(chunk.dataset.tolist(), chunk.shard.tolist(), chunk.index.tolist())
        return [Pointer(self._datasets[d].name, s, i) for d, s, i in columns]

    def pointer(self, sid: int) -> Pointer:
        """The pointer behind a sample id found in a batch's lineage."""
        return pointer_of(self, sid)

    def shards_for(self, chunks: Iterable[int]) -> dict[str, list[int]]:
        """The shards, per dataset name, that these chunks read (see :func:`shards_for`)."""
        return shards_for(self, chunks)


def shards_for(source: WorkSource, chunks: Iterable[int]) -> dict[str, list[int]]:
    """Which shards of which dataset the chunks numbered ``chunks`` need, sorted per dataset name, so a
    caching reader can prefetch exactly those files. Chunks past the end need nothing."""
    need: dict[int, set[int]] = {}
    for ch in filter(None, map(source.chunk, chunks)):
        for d, s in zip(ch.dataset.tolist(), ch.shard.tolist()):
            need.setdefault(d, set()).add(s)
    return {source.datasets[d].name: sorted(need[d]) for d in sorted(need)}


def pointer_of(source: WorkSource, sid: int) -> Pointer:
    """The pointer behind sample id ``sid`` of ``source`` (recomputes its chunk)."""
    g, off = split_sample_id(sid)
    ch = source.chunk(g)
    if ch is None or off >= len(ch):
        raise ConfigError(f"sample id {sid} (chunk {g}, offset {off}) is past the end of the data")
    return Pointer(source.datasets[int(ch.dataset[off])].name, int(ch.shard[off]), int(ch.index[off]))
