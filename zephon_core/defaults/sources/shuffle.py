"""Epoch orders of one dataset: which (shard, index) sits at each position of an epoch, per shuffle mode.

Files are usually written in some order (by domain, date, source, length). Walking one shard at a
time leaks that order into training: a stretch of steps sees one domain. The modes trade shuffle
quality against read locality (how many files a chunk touches, and how many the node cache must hold):

* ``"shard"``: shards in a seeded order, blocks of 1,024 samples shuffled inside each shard (the
  order of zephon-core 0.1, kept bit for bit). A chunk reads one or two files; a window of 1,024
  samples holds a few shards' labels at best.
* an int ``B``: the shards, in a seeded order, are laid end to end and cut into blocks of at least
  ``B`` samples that span shard boundaries; blocks come in a seeded order and are shuffled inside
  (the idea of Mosaic Streaming's ``py1e``). A chunk reads about ``B / shard size`` files.
* ``"auto"`` (the default): the shuffled shards form groups of about :data:`AUTO_SHARDS` (at most
  :data:`AUTO_MAX_GROUP` samples, so a group's files fit the node cache); inside a group, each shard
  is shuffled and the group's shards take turns in runs of at most :data:`AUTO_RUN` samples, always
  in the same (seeded) cyclic order. So any 1,024 consecutive samples hold at least 8 shards, while
  a chunk of 256 reads only two or three files.
* ``"global"``: a full keyed permutation of the dataset (:class:`~zephon_core.defaults.sources.feistel.FeistelPermutation`),
  computed per position without materialising it. Best quality; a chunk reads up to one file per sample.

Every order is a pure function of (seed, dataset name, epoch, position): a lane still jumps straight
to its chunks. Cross-shard blocks are whole permutations built on demand and cached (a few at a
time: all lanes walk the same region of an epoch).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any, Literal, Protocol, TypeVar, cast

import numpy as np

from zephon_core.defaults.sources.feistel import FeistelPermutation
from zephon_core.defaults.sources.permutation import BlockShuffle
from zephon_core.errors import ConfigError
from zephon_core.hashing import splitmix64, stable_hash64

_Blocks = TypeVar("_Blocks", np.ndarray, np.int64)  # block numbers: an array of them, or one

ShuffleBlockSize = Literal["shard", "auto", "global"] | int
"""The ``shuffle_block_size`` argument of the work sources."""

SHARD_MODE_BLOCK = 1024
"""Blocks inside a shard in ``"shard"`` mode (zephon-core 0.1's default ``shuffle_block_size``)."""

AUTO_SHARDS = 8
"""``"auto"`` groups span about this many shards (between 8 and 15 when the dataset has 8 or more)."""

AUTO_RUN = 128
"""Longest run of one shard in ``"auto"`` mode: 1,024 / 8, so any 1,024 samples span 8 runs of 8 shards."""

AUTO_MAX_GROUP = 1 << 22
"""``"auto"`` groups hold at most this many samples (4M, about 4 GB at 1 KB a sample): fewer shards
per group for huge shards, so a group's files fit the node cache (64 GiB by default)."""


class EpochOrder(Protocol):
    """Maps positions of one epoch of a dataset to (shard, index in shard)."""

    def locate(self, epoch: int, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...


def check_block_size(value: Any) -> ShuffleBlockSize:
    """Validate a ``shuffle_block_size`` argument; the error says what is accepted."""
    if (isinstance(value, str) and value in ("shard", "auto", "global")) or (
        isinstance(value, int) and not isinstance(value, bool) and value >= 1
    ):
        return cast(ShuffleBlockSize, value)
    raise ConfigError(
        f"shuffle_block_size must be 'shard', 'auto', 'global' or an int >= 1 (samples per block), got {value!r}"
    )


def auto_group(sizes: np.ndarray) -> int:
    """Shards per ``"auto"`` group aimed at for shards of these sizes (see :data:`AUTO_SHARDS`)."""
    mean = max(1, math.ceil(float(np.mean(sizes)))) if len(sizes) else 1
    return max(1, min(AUTO_SHARDS, AUTO_MAX_GROUP // mean))


def describe_block_size(mode: ShuffleBlockSize) -> Any:
    """The fingerprint value: ``"shard"`` keeps 0.1's ``1024`` so its checkpoints still load."""
    if mode == "shard":
        return SHARD_MODE_BLOCK
    if isinstance(mode, int):
        return {"across_shards": mode}
    return mode


def make_order(sizes: np.ndarray, seed: int, name: str, mode: ShuffleBlockSize, shuffle: bool) -> EpochOrder:
    """The epoch order of a dataset with these shard sizes (``shuffle=False``: file order, any mode)."""
    if not shuffle or mode == "shard":
        return BlockShuffle(sizes, seed, name, SHARD_MODE_BLOCK, shuffle)
    if mode == "global":
        return GlobalShuffle(sizes, seed, name)
    if mode == "auto":
        return ShardGroups(sizes, seed, name, auto_group(sizes))
    return CrossShardBlocks(sizes, seed, name, int(mode))


def _perm(key: int, n: int) -> np.ndarray:
    order = np.argsort(splitmix64(np.arange(n, dtype=np.uint64) ^ np.uint64(key)), kind="stable")
    return order.astype(np.int32 if n < (1 << 31) else np.int64)


class CrossShardBlocks:
    """Blocks of at least ``block`` samples cut across the shuffled shard sequence (see the module docstring).

    The ``n_blocks = max(1, total // block)`` blocks split the epoch evenly, so the last block is
    never a short one that spans fewer shards than the rest.
    """

    def __init__(self, sizes: np.ndarray, seed: int, name: str, block: int) -> None:
        self.sizes = np.asarray(sizes, dtype=np.int64)
        self.total = int(self.sizes.sum())
        self.seed = seed
        self.name = name
        self.block = int(block)
        self.n_blocks = max(1, self.total // self.block)
        self._layout = lru_cache(maxsize=4)(self._shard_layout)
        self._blocks = lru_cache(maxsize=4)(self._block_layout)
        self._inner = lru_cache(maxsize=64)(self._inner_perm)

    def _key(self, *parts: object) -> int:
        return stable_hash64("zephon-xshard", self.seed, self.name, *parts)

    def _bounds(self, b: _Blocks) -> _Blocks:
        bounds: _Blocks = (b * self.total) // self.n_blocks
        return bounds

    def _shard_layout(self, epoch: int) -> tuple[np.ndarray, np.ndarray]:
        order = _perm(self._key(epoch, "shards"), len(self.sizes)).astype(np.int64)
        return order, np.concatenate([[0], np.cumsum(self.sizes[order])])

    def _block_layout(self, epoch: int) -> tuple[np.ndarray, np.ndarray]:
        order = _perm(self._key(epoch, "blocks"), self.n_blocks).astype(np.int64)
        lengths = self._bounds(order + 1) - self._bounds(order)
        return order, np.concatenate([[0], np.cumsum(lengths)])

    def _inner_perm(self, epoch: int, block: int) -> np.ndarray:
        b = np.array([block, block + 1], dtype=np.int64)
        lo, hi = self._bounds(b).tolist()
        return _perm(self._key(epoch, block), hi - lo)

    def locate(self, epoch: int, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Shard numbers and indices for positions ``pos`` (0 ≤ pos < total) of ``epoch``."""
        pos = np.asarray(pos, dtype=np.int64)
        border, ostarts = self._blocks(epoch)
        slot = np.searchsorted(ostarts, pos, side="right") - 1
        src = border[slot]
        offset = pos - ostarts[slot]
        virtual = np.empty_like(pos)
        for blk in np.unique(src).tolist():
            m = src == blk
            virtual[m] = int(self._bounds(np.int64(blk))) + self._inner(epoch, blk)[offset[m]]
        order, starts = self._layout(epoch)
        vslot = np.searchsorted(starts, virtual, side="right") - 1
        return order[vslot], virtual - starts[vslot]


class ShardGroups:
    """``"auto"``: groups of about ``group`` shuffled shards, interleaved in runs (see the module docstring).

    Inside a group of ``m`` shards every shard is cut into the same number ``R`` of runs of at most
    :data:`AUTO_RUN` samples; round ``k`` holds run ``k`` of each shard, in the group's cyclic order.
    Any ``w`` consecutive runs of a group therefore name ``min(w, m)`` shards, and runs of two groups
    never share a shard.
    """

    def __init__(self, sizes: np.ndarray, seed: int, name: str, group: int) -> None:
        self.sizes = np.asarray(sizes, dtype=np.int64)
        self.total = int(self.sizes.sum())
        self.seed = seed
        self.name = name
        self.n_groups = max(1, len(self.sizes) // max(1, group))
        self._epoch = lru_cache(maxsize=4)(self._epoch_layout)
        self._group = lru_cache(maxsize=16)(self._group_layout)
        self._shard_perm = lru_cache(maxsize=64)(self._permute_shard)

    def _key(self, *parts: object) -> int:
        return stable_hash64("zephon-groups", self.seed, self.name, *parts)

    def _raw_order(self, epoch: int) -> np.ndarray:
        if self.n_groups == 1:  # one group: one cycle for every epoch, so epochs join without a seam
            return _perm(self._key("shards"), len(self.sizes)).astype(np.int64)
        return _perm(self._key(epoch, "shards"), len(self.sizes)).astype(np.int64)

    def _epoch_layout(self, epoch: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Shard order, each group's first slot in it, and each group's first position.

        Across an epoch boundary a window holds the last runs of one group and the first runs of
        another. So that it still names 8 shards, the first group of an epoch puts last, in the
        same order, the shards that closed the previous epoch (the last ``AUTO_SHARDS - 1`` of its
        last group, which is never adjusted itself: no recursion over epochs).
        """
        order = self._raw_order(epoch)
        slots = (np.arange(self.n_groups + 1, dtype=np.int64) * len(order)) // self.n_groups
        if epoch > 0 and self.n_groups > 1:
            prev = self._raw_order(epoch - 1)
            tail = prev[slots[-2] : slots[-1]][-(AUTO_SHARDS - 1) :].tolist()
            first = order[: slots[1]].tolist()
            moved = [s for s in tail if s in first]
            order[: slots[1]] = [s for s in first if s not in moved] + moved
        cum = np.concatenate([[0], np.cumsum(self.sizes[order])])
        return order, slots, cum[slots]

    def _group_layout(self, epoch: int, group: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        """The group's shards, their sizes, the first position of every run (round-major), and ``R``."""
        order, slots, _ = self._epoch(epoch)
        shards = order[slots[group] : slots[group + 1]]
        n = self.sizes[shards]
        rounds = max(1, -(-int(n.max()) // AUTO_RUN))
        k = np.arange(rounds + 1, dtype=np.int64)
        lengths = (np.diff((k[:, None] * n[None, :]) // rounds, axis=0)).ravel()  # (round, shard), round-major
        return shards, n, np.concatenate([[0], np.cumsum(lengths)]), rounds

    def _permute_shard(self, epoch: int, shard: int) -> np.ndarray:
        return _perm(self._key(epoch, shard), int(self.sizes[shard]))

    def locate(self, epoch: int, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Shard numbers and indices for positions ``pos`` (0 ≤ pos < total) of ``epoch``."""
        pos = np.asarray(pos, dtype=np.int64)
        _, _, gstarts = self._epoch(epoch)
        group = np.searchsorted(gstarts, pos, side="right") - 1
        shard = np.empty_like(pos)
        index = np.empty_like(pos)
        for g in np.unique(group).tolist():
            m = group == g
            shards, n, run_starts, rounds = self._group(epoch, g)
            local = pos[m] - gstarts[g]
            run = np.searchsorted(run_starts, local, side="right") - 1
            k, j = np.divmod(run, len(shards))
            within = (k * n[j]) // rounds + (local - run_starts[run])
            s_out, i_out = shards[j], np.empty_like(local)
            for jj in np.unique(j).tolist():
                mj = j == jj
                i_out[mj] = self._shard_perm(epoch, int(shards[jj]))[within[mj]]
            shard[m], index[m] = s_out, i_out
        return shard, index


class GlobalShuffle:
    """A full keyed permutation of the dataset per epoch, one position at a time (never materialised)."""

    def __init__(self, sizes: np.ndarray, seed: int, name: str) -> None:
        self.sizes = np.asarray(sizes, dtype=np.int64)
        self.total = int(self.sizes.sum())
        self.seed = seed
        self.name = name
        self._starts = np.concatenate([[0], np.cumsum(self.sizes)])
        self._perm = lru_cache(maxsize=4)(self._epoch_perm)

    def _epoch_perm(self, epoch: int) -> FeistelPermutation:
        return FeistelPermutation(self.total, stable_hash64("zephon-global", self.seed, self.name, epoch))

    def locate(self, epoch: int, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Shard numbers and indices for positions ``pos`` (0 ≤ pos < total) of ``epoch``."""
        flat = self._perm(epoch)(np.asarray(pos, dtype=np.int64))
        shard = np.searchsorted(self._starts, flat, side="right") - 1
        return shard, flat - self._starts[shard]


def locate_draws(
    orders: list[EpochOrder],
    sizes: list[int],
    comp: np.ndarray,
    draw: np.ndarray,
    reshuffle: list[bool] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Shard and index of draw ``draw[i]`` (0-based, counted over all epochs) of dataset ``comp[i]``;
    a dataset whose ``reshuffle`` is False reads every epoch in epoch 0's order."""
    shard = np.empty(len(comp), dtype=np.int64)
    index = np.empty(len(comp), dtype=np.int64)
    for c in np.unique(comp).tolist():
        m = comp == c
        epoch, pos = np.divmod(draw[m], sizes[c])
        if reshuffle is not None and not reshuffle[c]:
            epoch = np.zeros_like(epoch)
        s_out = np.empty(len(pos), dtype=np.int64)
        i_out = np.empty(len(pos), dtype=np.int64)
        for e in np.unique(epoch).tolist():
            me = epoch == e
            s_out[me], i_out[me] = orders[c].locate(e, pos[me])
        shard[m], index[m] = s_out, i_out
    return shard, index
