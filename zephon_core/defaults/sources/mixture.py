"""Mixture weights and the deterministic interleaving schedule.

The schedule is smooth weighted round robin with integer weights ``a_d``: over each period of
``A = sum(a_d)`` positions, component ``d`` appears exactly ``a_d`` times, spread as evenly as
possible (element ``k`` of component ``d`` ideally sits at ``(k + 0.5) / a_d`` of the period).
Because the schedule is periodic, the draw counts at any global position are closed-form, so a
lane can jump straight to its chunks without enumerating the others.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import InitVar, dataclass
from fractions import Fraction
from functools import reduce
from math import gcd

import numpy as np

from zephon_core.errors import ConfigError

MAX_PERIOD = 1 << 16


SUM_TOLERANCE = 1e-9
"""How far from 1 the weights may sum before :class:`MixtureSpec` warns that it normalises them."""


@dataclass(frozen=True)
class MixtureSpec:
    """Target proportions per dataset name, e.g. ``MixtureSpec({"web": 0.75, "code": 0.25})``.

    Weights are normalised to sum to one. Weights that do not already sum to one give a
    ``UserWarning`` naming the normalised shares, because a typo (``{"web": 0.7, "code": 0.2}``)
    would otherwise change the mixture silently; pass ``ratios=True`` when they are ratios on purpose
    (``MixtureSpec({"web": 3, "code": 1}, ratios=True)``). Zero or negative weights are an error
    (leave the dataset out instead). ``ratios`` only silences the warning: the spec, and so a
    checkpoint's fingerprint, holds the weights as given either way.
    """

    weights: Mapping[str, float]
    ratios: InitVar[bool] = False

    def __post_init__(self, ratios: bool) -> None:
        if not self.weights:
            raise ConfigError("MixtureSpec needs at least one dataset weight")
        for name, w in self.weights.items():
            if not isinstance(w, (int, float)) or not w > 0 or w != w or w == float("inf"):
                raise ConfigError(f"MixtureSpec weight for {name!r} must be a positive number, got {w!r}")
        if not isinstance(ratios, bool):
            raise ConfigError(f"MixtureSpec: ratios must be True or False, got {ratios!r}")
        object.__setattr__(self, "weights", dict(self.weights))
        unnormalised = None if ratios else not_normalised(self.weights)
        if unnormalised is not None:
            warnings.warn(
                f"MixtureSpec: {unnormalised}. Give weights that sum to 1, or pass ratios=True if they are ratios "
                "on purpose",
                UserWarning,
                stacklevel=3,  # the caller of MixtureSpec(...), past __init__ and __post_init__
            )

    def normalized(self) -> dict[str, float]:
        total = sum(self.weights.values())
        return {k: v / total for k, v in self.weights.items()}


def not_normalised(weights: Mapping[str, float]) -> str | None:
    """Says what the weights sum to and the shares they are normalised to, or None when they sum to 1.

    The text of :class:`MixtureSpec`'s warning, shared with ``zephon profile`` definitions (which
    say where the weights came from).
    """
    total = sum(weights.values())
    if abs(total - 1.0) <= SUM_TOLERANCE:
        return None
    shares = {k: round(v / total, 6) for k, v in weights.items()}
    return f"the weights {dict(weights)} sum to {total:g}, not 1; they are normalised to {shares}"


def integer_weights(weights: list[float], max_period: int = MAX_PERIOD) -> np.ndarray:
    """Small integers in (nearly) the same ratio as ``weights``, summing to at most ``max_period``."""
    total = sum(weights)
    fracs = [Fraction(w / total).limit_denominator(max_period // max(1, len(weights))) for w in weights]
    den = reduce(lambda a, b: a * b // gcd(a, b), (f.denominator for f in fracs), 1)
    ints = [max(1, int(f * den)) for f in fracs]
    g = reduce(gcd, ints)
    ints = [i // g for i in ints]
    while sum(ints) > max_period:  # fall back to rounding at the period limit
        scale = max_period / sum(ints)
        ints = [max(1, round(i * scale)) for i in ints]
        if sum(ints) <= max_period:
            break
        max_period -= len(ints)
    return np.array(ints, dtype=np.int64)


class RoundRobinSchedule:
    """Which component fills each global position, and its draw number, in O(1) per position.

    The static mixture's interleaving. (Not :class:`~zephon_curricula.MixtureSchedule`, the
    public schedule of weights that change with progress.)
    """

    def __init__(self, weights: list[float]) -> None:
        self.a = integer_weights(weights)
        self.period = int(self.a.sum())
        d = len(self.a)
        keys = np.concatenate([(2 * np.arange(a) + 1) / (2 * a) for a in self.a.tolist()])
        comp = np.concatenate([np.full(a, i) for i, a in enumerate(self.a.tolist())])
        order = np.lexsort((comp, keys))  # exact ties broken by component index
        self.seq = comp[order].astype(np.int64)
        onehot = np.zeros((self.period, d), dtype=np.int64)
        onehot[np.arange(self.period), self.seq] = 1
        self.cum = np.vstack([np.zeros((1, d), dtype=np.int64), np.cumsum(onehot, axis=0)])

    def counts_at(self, position: int) -> np.ndarray:
        """How many draws each component has had before global ``position``."""
        q, r = divmod(position, self.period)
        counts: np.ndarray = q * self.a + self.cum[r]
        return counts

    def take(self, start: int, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Components and per-component draw numbers for global positions ``[start, start+n)``."""
        pos = np.arange(start, start + n, dtype=np.int64)
        q, r = np.divmod(pos, self.period)
        comp = self.seq[r]
        draw = q * self.a[comp] + self.cum[r, comp]
        return comp, draw

    def position_of_draw(self, comp: int, draw: int) -> int:
        """Global position at which component ``comp`` makes its ``draw``-th draw (0-based)."""
        q, r = divmod(draw, int(self.a[comp]))
        offsets = np.flatnonzero(self.seq == comp)
        return q * self.period + int(offsets[r])


@dataclass(frozen=True)
class Stretch:
    """From global position ``start`` on, the components ``alive`` (global indices) interleave by ``schedule``;
    ``base`` holds every component's draws before ``start``."""

    start: int
    alive: tuple[int, ...]
    schedule: RoundRobinSchedule
    base: np.ndarray


class PiecewiseRoundRobin:
    """The static mixture's interleaving when datasets run out: a round robin per stretch between exhaustions.

    Args:
        weights: sample weights per component.
        sizes: samples per component (one epoch).
        policies: per component, ``"stop"``, ``"repeat"`` or ``"redistribute"``.
        limits: per component, the draws after which it ends (None: ``sizes``, or never for
            ``"repeat"``); with a limit, ``policies`` says what its end does (``"stop"`` or
            ``"redistribute"``). This is how passes are bounded (``max_repeats``, ``stop_after_passes``).

    With only ``stop`` and ``repeat`` there is one stretch and the result is exactly
    :class:`RoundRobinSchedule`'s (so the data of those policies is unchanged). When a
    ``redistribute`` component is due the draw after its last sample, a new stretch starts there
    without it: the others keep their ratios, so its share goes to them in proportion to their weights.
    """

    def __init__(
        self, weights: list[float], sizes: list[int], policies: Sequence[str], limits: list[int | None] | None = None
    ) -> None:
        if limits is None:
            limits = [None if p == "repeat" else int(n) for n, p in zip(sizes, policies)]
        self.stretches: list[Stretch] = []
        self.events: list[tuple[int, int, int, str]] = []  # (position, component, draw, policy)
        self.end: int | None = None
        alive = tuple(range(len(weights)))
        start, base = 0, np.zeros(len(weights), dtype=np.int64)
        while True:
            sch = RoundRobinSchedule([weights[d] for d in alive])
            self.stretches.append(Stretch(start, alive, sch, base))
            due = [
                (start + sch.position_of_draw(j, int(lim - base[d])), d)
                for j, d in enumerate(alive)
                if (lim := limits[d]) is not None
            ]
            if not due:
                return
            pos, d = min(due)
            self.events.append((pos, d, int(limits[d] or 0), policies[d]))
            if policies[d] == "stop":
                self.end = pos
                return
            base = base.copy()
            base[list(alive)] += sch.counts_at(pos - start)
            alive = tuple(x for x in alive if x != d)
            start = pos
            if not alive:
                self.end = pos
                return

    def take(self, start: int, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Components and per-component draw numbers for global positions ``[start, start + n)``."""
        comps, draws = [], []
        pos, stop = start, start + n
        starts = [s.start for s in self.stretches]
        while pos < stop:
            i = int(np.searchsorted(starts, pos, side="right")) - 1
            s = self.stretches[i]
            upto = min(stop, self.stretches[i + 1].start) if i + 1 < len(self.stretches) else stop
            comp, draw = s.schedule.take(pos - s.start, upto - pos)
            glob = np.asarray(s.alive, dtype=np.int64)[comp]
            comps.append(glob)
            draws.append(draw + s.base[glob])
            pos = upto
        return np.concatenate(comps), np.concatenate(draws)
