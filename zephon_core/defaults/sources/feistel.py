"""A keyed permutation of ``[0, n)`` evaluated one position at a time: a Feistel network with cycle walking.

The ``"global"`` shuffle needs a full permutation of a dataset that may hold billions of samples,
yet a lane must find the sample at any position without building the permutation (that would cost
memory proportional to the dataset and time proportional to the position). A balanced Feistel
network over ``2^(2h) >= n`` values is a bijection for any round function; values that land outside
``[0, n)`` are encrypted again until they fall inside ("cycle walking"), which keeps it a bijection on
``[0, n)``. The domain is at most ``4n``, so a position needs at most a few walks on average.

The round function is SplitMix64 of the right half xor a per-round key, so the permutation is a pure
function of the key and identical on every machine and numpy version.
"""

from __future__ import annotations

import numpy as np

from zephon_core.hashing import stable_hash64

ROUNDS = 6
"""Luby-Rackoff: four rounds already give a pseudo-random permutation; six add margin for tiny domains."""


_GOLDEN, _M1, _M2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)


def _mix(z: np.ndarray) -> np.ndarray:
    """SplitMix64 on a uint64 array (array arithmetic wraps silently, so no errstate is needed)."""
    z = z + _GOLDEN
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    out: np.ndarray = z ^ (z >> _S31)
    return out


class FeistelPermutation:
    """``perm(x)`` for positions ``x`` in ``[0, n)``: a bijection of ``[0, n)`` chosen by ``key``."""

    def __init__(self, n: int, key: int, rounds: int = ROUNDS) -> None:
        if n < 1:
            raise ValueError(f"a permutation needs n >= 1, got {n}")
        self.n = int(n)
        bits = max(2, (self.n - 1).bit_length())
        bits += bits & 1
        self.half = bits // 2
        self.mask = np.uint64((1 << self.half) - 1)
        self.keys = [np.uint64(stable_hash64("zephon-feistel", key, r)) for r in range(rounds)]

    def _encrypt(self, x: np.ndarray) -> np.ndarray:
        h = np.uint64(self.half)
        left, right = x >> h, x & self.mask
        for k in self.keys:
            left, right = right, left ^ (_mix(right ^ k) & self.mask)
        out: np.ndarray = (left << h) | right
        return out

    def __call__(self, positions: np.ndarray) -> np.ndarray:
        """The images of ``positions`` (int array, each in ``[0, n)``), as int64."""
        x = np.asarray(positions, dtype=np.int64)
        if self.n == 1:
            return np.zeros_like(x)
        y = self._encrypt(x.astype(np.uint64))
        out = y >= np.uint64(self.n)
        while out.any():  # cycle walking: terminates, since x's own cycle returns into [0, n)
            y[out] = self._encrypt(y[out])
            out[out] = y[out] >= np.uint64(self.n)
        return y.astype(np.int64)
