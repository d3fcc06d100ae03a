"""Draw counts of a mixture whose weights change piece by piece, at any position, in closed form.

A plan is a list of pieces ``(start, a)``: from position ``start`` on, component ``d`` has weight
``a[d] / M`` (integers summing to :data:`M`). Each component's *quota* ``Q_d(p)`` is the integral of
its weight up to position ``p``; its ``k``-th draw is due when the quota reaches ``k + 1/2``, and
positions go to due draws in order of due time (ties to the lower component). With one piece this
is the smooth weighted round robin of the static mixture.

Piece boundaries are *hard*: the counts at a piece's start are fixed before the piece is looked at,
and inside the piece draws are due from the true quota onwards (a component slightly behind
catches up first, one slightly ahead waits). So adding a piece at position ``X`` — a breakpoint, a
trainer update, a dataset running out — never changes a count at or before ``X``, and errors never
accumulate: every count stays within about one draw of its quota.

Counts at a position take a search over the piece's due times in exact integer arithmetic, so they
are the same on every machine; the counts at piece starts are extended lazily and cached.
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from collections.abc import Sequence
from fractions import Fraction

M = 1 << 14
"""Weight resolution: weights are rounded to multiples of 1/16,384 (0.006 percentage points)."""


def integer_shares(weights: Sequence[float]) -> tuple[int, ...]:
    """Integers summing to :data:`M` in the ratio of ``weights`` (largest remainder); positive stays >= 1."""
    total = float(sum(weights))
    if total <= 0:
        raise ValueError("at least one weight must be positive")
    raw = [w / total * M for w in weights]
    ints = [int(r) for r in raw]
    for d, w in enumerate(weights):
        if w > 0 and ints[d] == 0:
            ints[d] = 1
    rest = M - sum(ints)
    order = sorted(range(len(raw)), key=lambda d: (-(raw[d] - int(raw[d])), d))
    while rest > 0:  # hand out the remainder by largest fraction
        for d in order:
            if rest == 0:
                break
            if weights[d] > 0:
                ints[d] += 1
                rest -= 1
    while rest < 0:  # the minimum-one rule overshot: take from the largest
        d = max(range(len(ints)), key=lambda i: (ints[i], -i))
        ints[d] -= 1
        rest += 1
    return tuple(ints)


def _due(qn: int, c: int, a: int, tau: int) -> int:
    """Draws of one component due at local time ``<= tau`` that it has not made (``c`` made so far)."""
    if a == 0:
        return 0
    v = (2 * (qn + a * tau) + M) // (2 * M) - c
    return v if v > 0 else 0


def local_counts(qn: Sequence[int], c: Sequence[int], a: Sequence[int], r: int) -> list[int]:
    """Draws per component in the first ``r`` positions of a piece (quota ``qn/M``, counts ``c`` at its start)."""
    n = len(a)
    if r <= 0:
        return [0] * n

    def total(t: int) -> int:
        return sum(_due(qn[d], c[d], a[d], t) for d in range(n))

    lo = hi = r  # find lo < hi with total(lo) <= r < total(hi)
    step = 1
    if total(lo) <= r:
        hi = lo + step
        while total(hi) <= r:
            lo, step = hi, step * 2
            hi = lo + step
    else:
        lo = hi - step
        while total(lo) > r:
            hi, step = lo, step * 2
            lo = hi - step
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if total(mid) <= r:
            lo = mid
        else:
            hi = mid
    out = [_due(qn[d], c[d], a[d], lo) for d in range(n)]
    need = r - sum(out)
    if need:
        due: list[tuple[Fraction, int]] = []
        for d in range(n):
            for k in range(c[d] + out[d], c[d] + _due(qn[d], c[d], a[d], hi)):
                due.append((Fraction((2 * k + 1) * M - 2 * qn[d], 2 * a[d]), d))
        due.sort()
        for _, d in due[:need]:
            out[d] += 1
    return out


class QuotaPlan:
    """Counts per component at any position of a piecewise-constant mixture (see the module docstring).

    Args:
        pieces: ``(start, a)`` with strictly increasing starts, the first at 0, each ``a`` summing
            to :data:`M` (or all zero: nothing can be drawn from there on).
    """

    def __init__(self, pieces: Sequence[tuple[int, Sequence[int]]]) -> None:
        if not pieces or pieces[0][0] != 0:
            raise ValueError("a plan starts with a piece at position 0")
        self.starts = [int(p) for p, _ in pieces]
        self.weights = [tuple(int(x) for x in a) for _, a in pieces]
        self.n = len(self.weights[0])
        self._qn: list[list[int]] = [[0] * self.n]
        self._c: list[list[int]] = [[0] * self.n]
        self._lock = threading.Lock()

    @property
    def dead_from(self) -> int | None:
        """The first position from which nothing can be drawn (an all-zero piece), or None."""
        return next((s for s, a in zip(self.starts, self.weights) if not any(a)), None)

    def _prefix(self, i: int) -> tuple[list[int], list[int]]:
        with self._lock:
            while len(self._c) <= i:
                j = len(self._c) - 1
                length = self.starts[j + 1] - self.starts[j]
                qn, c, a = self._qn[j], self._c[j], self.weights[j]
                add = local_counts(qn, c, a, length) if any(a) else [0] * self.n
                self._c.append([x + y for x, y in zip(c, add)])
                self._qn.append([q + w * length for q, w in zip(qn, a)])
            return self._qn[i], self._c[i]

    def starts_within(self, lo: int, hi: int) -> list[int]:
        """Piece starts strictly inside ``(lo, hi)``."""
        return self.starts[bisect_right(self.starts, lo) : bisect_right(self.starts, hi - 1)]

    def counts(self, position: int) -> list[int]:
        """Draws per component before ``position``."""
        i = bisect_right(self.starts, position) - 1
        qn, c = self._prefix(i)
        a = self.weights[i]
        if not any(a):
            return list(c)
        add = local_counts(qn, c, a, position - self.starts[i])
        return [x + y for x, y in zip(c, add)]

    def position_of_draw(self, d: int, k: int) -> int | None:
        """The position at which component ``d`` makes its ``k``-th draw (0-based); None if it never does."""
        last = len(self.starts) - 1
        if self.weights[last][d] == 0 and self._prefix(last)[1][d] <= k:
            return None
        # exponential then binary search for the first position p with counts(p + 1)[d] > k
        lo, hi, step = -1, 1, 1
        while self.counts(hi)[d] <= k:
            lo, step = hi, step * 2
            hi = lo + step
        while hi - lo > 1:  # counts(lo)[d] <= k < counts(hi)[d]
            mid = (lo + hi) // 2
            if self.counts(mid)[d] <= k:
                lo = mid
            else:
                hi = mid
        return hi - 1
