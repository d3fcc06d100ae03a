"""Lanes: how the global chunk sequence is split into fixed logical streams, and which a rank owns.

Chunk ``g`` is lane ``g mod L``'s ``g div L``-th chunk (``"modulo"``), or each round of ``L`` chunks
is dealt by a seeded permutation drawn per round (``"permute"``; see docs/distributed-training.md):
a lane's ``k``-th chunk is computed directly, with no state. ``L`` is in the fingerprint; the world
size ``W`` is not, if it divides ``L``: rank ``r`` owns lanes ``[r·L/W, (r+1)·L/W)`` (:class:`LaneLayout`)."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from zephon_core.errors import ConfigError


def is_int(v: object) -> bool:
    """An int that is not a bool (JSON ``true`` is not a count)."""
    return isinstance(v, int) and not isinstance(v, bool)


ASSIGNMENTS = ("modulo", "permute")


@functools.lru_cache(maxsize=4096)
def _round_permutation(num_lanes: int, seed: int, round_index: int) -> tuple[np.ndarray, np.ndarray]:
    """Round ``round_index``'s deal: ``slot[lane]`` (the chunk's place in the round) and its inverse."""
    slot = np.random.default_rng((seed & (2**63 - 1), round_index, 0x1A4E)).permutation(num_lanes)
    return slot, np.argsort(slot)


@dataclass(frozen=True, slots=True)
class LaneLayout:
    """``num_lanes`` lanes split over ``world_size`` data-parallel ranks, seen from ``rank`` (validated)."""

    num_lanes: int
    world_size: int = 1
    rank: int = 0
    assignment: str = "modulo"
    seed: int = 0

    def __post_init__(self) -> None:
        L, W = self.num_lanes, self.world_size
        if self.assignment not in ASSIGNMENTS:
            raise ConfigError(f"option lane_assignment must be one of {list(ASSIGNMENTS)}, got {self.assignment!r}")
        if not is_int(self.seed):
            raise ConfigError(f"option lane_seed must be an int, got {self.seed!r}")
        if not is_int(L) or L < 1:
            raise ConfigError(f"option lanes must be an int >= 1, got {L!r}")
        if not is_int(W) or W < 1:
            raise ConfigError(f"option dp_world_size must be an int >= 1, got {W!r}")
        if L % W:
            raise ConfigError(
                f"lanes={L} cannot be split evenly over dp_world_size={W}: choose lanes as a multiple of every "
                f"data-parallel size you will run on (e.g. {math.lcm(L, W)} for {L} and {W}); "
                f"valid sizes for lanes={L} are {[d for d in range(1, L + 1) if L % d == 0]}"
            )
        if not is_int(self.rank) or not 0 <= self.rank < W:
            raise ConfigError(f"dp_rank={self.rank!r} is out of range for dp_world_size={W}")

    @property
    def lanes_per_rank(self) -> int:
        return self.num_lanes // self.world_size

    @property
    def owned(self) -> list[int]:
        """The lanes this rank runs, in round order."""
        per = self.lanes_per_rank
        return list(range(self.rank * per, (self.rank + 1) * per))

    def owner(self, lane: int) -> int:
        """The rank that owns ``lane``."""
        if not is_int(lane) or not 0 <= lane < self.num_lanes:
            raise ConfigError(f"lane {lane!r} does not exist (num_lanes={self.num_lanes})")
        return lane // self.lanes_per_rank

    def chunk(self, lane: int, local_index: int) -> int:
        """Global chunk number of the ``local_index``-th chunk of ``lane``."""
        if self.assignment == "modulo":
            return local_index * self.num_lanes + lane
        slot, _ = _round_permutation(self.num_lanes, self.seed, local_index)
        return local_index * self.num_lanes + int(slot[lane])

    def locate(self, chunk: int) -> tuple[int, int]:
        """``(lane, local_index)`` of global chunk ``chunk``."""
        local, place = divmod(chunk, self.num_lanes)
        if self.assignment == "modulo":
            return place, local
        _, lane_at = _round_permutation(self.num_lanes, self.seed, local)
        return int(lane_at[place]), local

    def describe(self) -> dict[str, object] | None:
        """The fingerprint entry: None for the default (so earlier checkpoints keep their fingerprint)."""
        return None if self.assignment == "modulo" else {"mode": self.assignment, "seed": self.seed}

    def with_rank(self, rank: int, world_size: int) -> LaneLayout:
        """The same lanes seen from another rank of another world size (validated)."""
        return LaneLayout(self.num_lanes, world_size, rank, self.assignment, self.seed)
