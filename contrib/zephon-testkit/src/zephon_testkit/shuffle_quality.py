"""Shuffle quality, measured: how mixed are consecutive samples of a labelled dataset?

Used by ``benchmarks/bench_shuffle.py``, the shuffle tests and the *Shuffling* guide, and meant for
users too (``pip install zephon-testkit``; this module needs only NumPy): label each sample of your
dataset by what you fear leaks into training (source file, domain, date) and see what a window of
consecutive samples holds in each shuffle mode.

Two figures per window of ``window`` consecutive samples of the source's global sequence:

* distinct labels (the minimum over *every* window, sliding one sample at a time);
* a chi-square test of the label counts of non-overlapping windows against the dataset's label
  frequencies: a p-value > 0.01 means the window looks like a uniform draw from the dataset.

No SciPy needed: the chi-square survival function is the regularised upper incomplete gamma,
computed here by its series and continued fraction.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from zephon_core import WorkSource


def _gamma_q(a: float, x: float) -> float:
    """Regularised upper incomplete gamma ``Q(a, x)`` (Numerical Recipes' gser / gcf)."""
    if x <= 0:
        return 1.0
    lg = math.lgamma(a)
    if x < a + 1:
        term = total = 1.0 / a
        ap = a
        for _ in range(1000):
            ap += 1
            term *= x / ap
            total += term
            if abs(term) < abs(total) * 1e-15:
                break
        return max(0.0, 1.0 - total * math.exp(-x + a * math.log(x) - lg))
    tiny = 1e-300
    b = x + 1 - a
    c = 1 / tiny
    d = 1 / b
    h = d
    for i in range(1, 1000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        delta = d * c
        h *= delta
        if abs(delta - 1) < 1e-15:
            break
    return math.exp(-x + a * math.log(x) - lg) * h


def chi2_sf(stat: float, dof: int) -> float:
    """P(X >= stat) for a chi-square variable with ``dof`` degrees of freedom."""
    return _gamma_q(dof / 2, stat / 2)


@dataclass(frozen=True)
class WindowQuality:
    """Quality figures of one label sequence (see the module docstring)."""

    window: int
    min_distinct: int
    mean_distinct: float
    p_values: tuple[float, ...]

    @property
    def share_uniform(self) -> float:
        """Share of non-overlapping windows with p > 0.01."""
        return sum(p > 0.01 for p in self.p_values) / max(1, len(self.p_values))


def window_quality(labels: Sequence[int] | np.ndarray, window: int = 1024) -> WindowQuality:
    """Distinct labels per sliding window and chi-square p-values per non-overlapping window."""
    lab = np.asarray(labels, dtype=np.int64)
    k = int(lab.max()) + 1
    onehot = np.zeros((len(lab) + 1, k), dtype=np.int32)
    onehot[np.arange(1, len(lab) + 1), lab] = 1
    cum = np.cumsum(onehot, axis=0)
    counts = cum[window:] - cum[:-window]
    distinct = (counts > 0).sum(axis=1)
    freq = np.bincount(lab, minlength=k) / len(lab)
    present = freq > 0
    pvals = []
    for start in range(0, len(lab) - window + 1, window):
        obs = counts[start][present]
        exp = freq[present] * window
        stat = float(((obs - exp) ** 2 / exp).sum())
        pvals.append(chi2_sf(stat, int(present.sum()) - 1))
    return WindowQuality(window, int(distinct.min()), float(distinct.mean()), tuple(pvals))


def source_labels(source: WorkSource, label: Callable[[int, int, int], int], limit: int | None = None) -> np.ndarray:
    """``label(dataset, shard, index)`` of every sample of ``source`` in global order (up to ``limit``)."""
    out: list[np.ndarray] = []
    got, g = 0, 0
    while limit is None or got < limit:
        ch = source.chunk(g)
        if ch is None:
            break
        out.append(
            np.array([label(d, s, i) for d, s, i in zip(ch.dataset.tolist(), ch.shard.tolist(), ch.index.tolist())])
        )
        got += len(ch)
        g += 1
    seq = np.concatenate(out) if out else np.zeros(0, dtype=np.int64)
    return seq[:limit] if limit is not None else seq


def files_per_chunk(source: WorkSource, chunks: int | None = None) -> float:
    """Mean number of distinct (dataset, shard) files a chunk of ``source`` touches."""
    per: list[int] = []
    g = 0
    while chunks is None or g < chunks:
        ch = source.chunk(g)
        if ch is None:
            break
        per.append(len(set(zip(ch.dataset.tolist(), ch.shard.tolist()))))
        g += 1
    return float(np.mean(per)) if per else 0.0
