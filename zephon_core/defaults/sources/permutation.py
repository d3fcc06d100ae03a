"""Blockwise shuffling of a dataset's samples, computed on demand for any draw number.

Order per epoch: shards in a seeded random order; inside each shard, blocks of ``block_size``
consecutive samples in a seeded random order; inside each block, a seeded random order. A chunk's
draws from one dataset therefore land in one or two blocks of one shard, which keeps reads local
(one Parquet row group, one LitData chunk) while still mixing the whole dataset across a run.
Every permutation is an argsort of hashed counters, so it is a pure function of (seed, dataset,
epoch, shard, block) and identical on every machine and numpy version.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from zephon_core.hashing import splitmix64, stable_hash64


def _perm(key: int, n: int) -> np.ndarray:
    return np.argsort(splitmix64(np.arange(n, dtype=np.uint64) ^ np.uint64(key)), kind="stable")


class BlockShuffle:
    """Maps (epoch, position-in-epoch) of one dataset to (shard, index in shard)."""

    def __init__(self, sizes: np.ndarray, seed: int, name: str, block_size: int, shuffle: bool) -> None:
        self.sizes = np.asarray(sizes, dtype=np.int64)
        self.total = int(self.sizes.sum())
        self.seed = seed
        self.name = name
        self.block = max(1, int(block_size))
        self.shuffle = shuffle
        self._plain_starts = np.concatenate([[0], np.cumsum(self.sizes)])
        self._epoch_layout = lru_cache(maxsize=4)(self._layout)
        self._block_perm = lru_cache(maxsize=256)(self._blocks)
        self._inner_perm = lru_cache(maxsize=4096)(self._inner)

    def _key(self, *parts: object) -> int:
        return stable_hash64("zephon-perm", self.seed, self.name, *parts)

    def _layout(self, epoch: int) -> tuple[np.ndarray, np.ndarray]:
        order = _perm(self._key(epoch, "shards"), len(self.sizes)) if self.shuffle else np.arange(len(self.sizes))
        starts = np.concatenate([[0], np.cumsum(self.sizes[order])])
        return order, starts

    def _blocks(self, epoch: int, shard: int) -> tuple[np.ndarray, np.ndarray]:
        size = int(self.sizes[shard])
        nb = (size + self.block - 1) // self.block
        order = _perm(self._key(epoch, shard, "blocks"), nb)
        lengths = np.minimum(self.block, size - order * self.block)
        return order, np.concatenate([[0], np.cumsum(lengths)])

    def _inner(self, epoch: int, shard: int, block: int, length: int) -> np.ndarray:
        return _perm(self._key(epoch, shard, block), length)

    def locate(self, epoch: int, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Shard numbers and indices for positions ``pos`` (0 ≤ pos < total) of ``epoch``."""
        if not self.shuffle:
            shard = np.searchsorted(self._plain_starts, pos, side="right") - 1
            return shard, pos - self._plain_starts[shard]
        order, starts = self._epoch_layout(epoch)
        slot = np.searchsorted(starts, pos, side="right") - 1
        shard = order[slot]
        local = pos - starts[slot]
        index = np.empty_like(local)
        b = self.block
        for s in np.unique(shard).tolist():
            m = shard == s
            lo = local[m]
            blocks, bstarts = self._block_perm(epoch, s)
            slot_b = np.searchsorted(bstarts, lo, side="right") - 1
            src_block = blocks[slot_b]
            offset = lo - bstarts[slot_b]
            size = int(self.sizes[s])
            out = np.empty_like(lo)
            for blk in np.unique(src_block).tolist():
                mm = src_block == blk
                length = min(b, size - blk * b)
                out[mm] = blk * b + self._inner_perm(epoch, s, blk, length)[offset[mm]]
            index[m] = out
        return shard, index
