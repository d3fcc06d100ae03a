"""StaticMixtureWorkSource: what to train on, as numbered chunks of sample pointers.

The source does no payload I/O. Chunk ``g`` holds the pointers for global positions
``[g * chunk_size, (g + 1) * chunk_size)`` of the mixture schedule, and is a pure function of the
source's configuration and ``g``. That is what makes lanes cheap: a lane owns chunks
``g ≡ lane (mod L)`` and can compute any of them directly, so its state is one counter.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from zephon_core.errors import ConfigError
from zephon_core.work.dataset import Dataset
from zephon_core.work.mixture import MixtureSchedule, MixtureSpec
from zephon_core.work.permutation import BlockShuffle

MAX_CHUNK_SIZE = 1 << 16
"""Sample ids pack (chunk number, offset) into one integer, so offsets need 16 bits."""


def sample_id(chunk: int, offset: int) -> int:
    """The lane-unique identity of the ``offset``-th pointer of chunk ``chunk``."""
    return (chunk << 16) | offset


def split_sample_id(sid: int) -> tuple[int, int]:
    """Inverse of :func:`sample_id`: ``(chunk, offset)``."""
    return sid >> 16, sid & 0xFFFF


@dataclass(frozen=True, slots=True)
class Pointer:
    """One sample, identified without reading it."""

    dataset: str
    shard: int
    index: int


@dataclass(frozen=True, slots=True)
class Chunk:
    """Chunk ``number`` of the global sequence: parallel arrays of dataset, shard and index."""

    number: int
    dataset: np.ndarray
    shard: np.ndarray
    index: np.ndarray

    def __len__(self) -> int:
        return len(self.index)


class StaticMixtureWorkSource:
    """Interleaves datasets in fixed proportions, in shuffled order, as numbered chunks.

    Args:
        datasets: the components, each with a unique name.
        mixture: weight per dataset name; default is proportional to dataset sizes.
        chunk_size: pointers per chunk (the unit of lane routing, replay and checkpointing).
        seed: seeds every permutation.
        shuffle: shuffle shard order and samples within shards (blockwise); False keeps file order.
        shuffle_block_size: samples per locality block for the within-shard shuffle.
        exhaustion: ``"stop"`` ends the source when the first component runs out (the mixture stays
            exact to the end); ``"repeat"`` starts a new, freshly shuffled pass of a component
            whenever it runs out.
        weight_by: ``"samples"``; ``"tokens"`` once calibrated by a tokenizer operator.
    """

    def __init__(
        self,
        datasets: Sequence[Dataset],
        mixture: MixtureSpec | None = None,
        chunk_size: int = 256,
        seed: int = 0,
        *,
        shuffle: bool = True,
        shuffle_block_size: int = 1024,
        exhaustion: Literal["stop", "repeat"] = "stop",
        weight_by: Literal["samples", "tokens"] = "samples",
    ) -> None:
        self.datasets = list(datasets)
        if not self.datasets:
            raise ConfigError("StaticMixtureWorkSource needs at least one dataset")
        names = [d.name for d in self.datasets]
        if len(set(names)) != len(names):
            raise ConfigError(f"dataset names must be unique, got {names}")
        if mixture is None:
            mixture = MixtureSpec({d.name: float(d.num_samples) for d in self.datasets})
        missing = set(names) - set(mixture.weights)
        extra = set(mixture.weights) - set(names)
        if missing or extra:
            raise ConfigError(
                f"mixture and datasets disagree: no weight for {sorted(missing)}, "
                f"weights for unknown datasets {sorted(extra)}"
            )
        if not isinstance(chunk_size, int) or not 0 < chunk_size <= MAX_CHUNK_SIZE:
            raise ConfigError(f"chunk_size must be an int in [1, {MAX_CHUNK_SIZE}], got {chunk_size!r}")
        if exhaustion not in ("stop", "repeat"):
            raise ConfigError(f"exhaustion must be 'stop' or 'repeat', got {exhaustion!r}")
        if weight_by not in ("samples", "tokens"):
            raise ConfigError(f"weight_by must be 'samples' or 'tokens', got {weight_by!r}")
        if not isinstance(seed, int):
            raise ConfigError(f"seed must be an int, got {seed!r}")
        self.mixture = mixture
        self.chunk_size = chunk_size
        self.seed = seed
        self.shuffle = shuffle
        self.exhaustion = exhaustion
        self.weight_by = weight_by
        self.tokens_per_sample: dict[str, float] | None = None
        self._orders = [BlockShuffle(d.sizes, seed, d.name, shuffle_block_size, shuffle) for d in self.datasets]
        self._block_size = shuffle_block_size
        self._schedule: MixtureSchedule | None = None
        self._end: int | None = None

    # -- mixing -----------------------------------------------------------------------------
    def set_token_estimates(self, tokens_per_sample: dict[str, float]) -> None:
        """Freeze per-dataset tokens-per-sample estimates used when ``weight_by="tokens"``."""
        self.tokens_per_sample = {k: float(v) for k, v in tokens_per_sample.items()}
        self._schedule = None
        self._end = None

    def sample_weights(self) -> list[float]:
        """Weights in samples per dataset (token weights divided by tokens per sample)."""
        w = [float(self.mixture.weights[d.name]) for d in self.datasets]
        if self.weight_by == "tokens":
            if self.tokens_per_sample is None:
                raise ConfigError(
                    "weight_by='tokens' needs token estimates: add a tokenize operator to the "
                    "pipeline or call set_token_estimates()"
                )
            w = [wi / max(self.tokens_per_sample[d.name], 1e-9) for wi, d in zip(w, self.datasets)]
        return w

    @property
    def schedule(self) -> MixtureSchedule:
        if self._schedule is None:
            self._schedule = MixtureSchedule(self.sample_weights())
        return self._schedule

    @property
    def end_position(self) -> int | None:
        """First global position that does not exist (``stop``), or None (``repeat``)."""
        if self.exhaustion == "repeat":
            return None
        if self._end is None:
            sch = self.schedule
            self._end = min(sch.position_of_draw(i, d.num_samples) for i, d in enumerate(self.datasets))
        return self._end

    @property
    def num_chunks(self) -> int | None:
        end = self.end_position
        return None if end is None else (end + self.chunk_size - 1) // self.chunk_size

    # -- chunks -----------------------------------------------------------------------------
    def chunk(self, number: int) -> Chunk | None:
        """Chunk ``number`` of the global sequence, or None past the end of the data."""
        start = number * self.chunk_size
        stop = start + self.chunk_size
        end = self.end_position
        if end is not None:
            stop = min(stop, end)
        if stop <= start:
            return None
        comp, draw = self.schedule.take(start, stop - start)
        shard = np.empty(len(comp), dtype=np.int64)
        index = np.empty(len(comp), dtype=np.int64)
        for c in np.unique(comp).tolist():
            m = comp == c
            total = self.datasets[c].num_samples
            epoch, pos = np.divmod(draw[m], total)
            s_out = np.empty(len(pos), dtype=np.int64)
            i_out = np.empty(len(pos), dtype=np.int64)
            for e in np.unique(epoch).tolist():
                me = epoch == e
                s_out[me], i_out[me] = self._orders[c].locate(e, pos[me])
            shard[m], index[m] = s_out, i_out
        return Chunk(number, comp.astype(np.int32), shard, index)

    def pointers(self, chunk: Chunk) -> list[Pointer]:
        """Human-readable pointers of a chunk (for debugging and lineage answers)."""
        return [
            Pointer(self.datasets[d].name, s, i)
            for d, s, i in zip(chunk.dataset.tolist(), chunk.shard.tolist(), chunk.index.tolist())
        ]

    def pointer(self, sid: int) -> Pointer:
        """The pointer behind a sample id found in a batch's lineage."""
        g, off = split_sample_id(sid)
        ch = self.chunk(g)
        if ch is None or off >= len(ch):
            raise ConfigError(f"sample id {sid} (chunk {g}, offset {off}) is past the end of the data")
        return Pointer(self.datasets[int(ch.dataset[off])].name, int(ch.shard[off]), int(ch.index[off]))

    def dataset_index(self, sid: int) -> int:
        """Which dataset (index into ``datasets``) the sample id ``sid`` was drawn from."""
        g, off = split_sample_id(sid)
        return int(self._chunk_datasets(g)[off])

    def _chunk_datasets(self, g: int) -> np.ndarray:
        cache = self.__dict__.setdefault("_ds_cache", {})
        arr = cache.get(g)
        if arr is None:
            start = g * self.chunk_size
            end = self.end_position
            stop = start + self.chunk_size if end is None else min(start + self.chunk_size, end)
            arr = self.schedule.take(start, max(0, stop - start))[0]
            if len(cache) > 4096:
                cache.clear()
            cache[g] = arr
        return arr

    # -- identity and state -----------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        """JSON-able definition for the pipeline fingerprint."""
        return {
            "type": "StaticMixtureWorkSource",
            "datasets": [d.describe() for d in self.datasets],
            "mixture": {k: float(v) for k, v in sorted(self.mixture.weights.items())},
            "chunk_size": self.chunk_size,
            "seed": self.seed,
            "shuffle": self.shuffle,
            "shuffle_block_size": self._block_size,
            "exhaustion": self.exhaustion,
            "weight_by": self.weight_by,
        }

    def state_dict(self) -> dict[str, Any]:
        """The source's own state: only the frozen token estimates (positions live per lane)."""
        return {"tokens_per_sample": self.tokens_per_sample}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        tps = state.get("tokens_per_sample")
        if tps is not None:
            self.set_token_estimates(tps)
