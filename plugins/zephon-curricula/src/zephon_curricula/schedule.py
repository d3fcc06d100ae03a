"""``MixtureSchedule``: mixture weights that change with progress, fixed in advance (a curriculum).

``MixtureSchedule([(0, {"web": 0.7, "code": 0.3}), (200_000, {"web": 0.3, "code": 0.7})])`` means:
from the first sample, 70 % web; from global sample 200,000 on, 30 % web. Breakpoints are counted
in samples drawn (``unit="samples"``) or in tokens drawn (``unit="tokens"``, through the frozen
tokens-per-sample estimates of token-aware mixing); between breakpoints the weights hold
(``interpolate="step"``) or move linearly to the next breakpoint's (``interpolate="linear"``).
A dataset missing from a breakpoint has weight 0 there, so components may enter and leave.

The schedule itself is only a description; :meth:`MixtureSchedule.pieces` turns it into pieces of
constant weights over global sample positions, which
:class:`~zephon_curricula.scheduled.ScheduledMixtureWorkSource` maps onto each lane. Linear ramps
become :data:`LINEAR_STEPS` constant steps per segment, each at the ramp's value in its middle, so a
segment's average weight is exactly the ramp's.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from zephon_core import ConfigError

LINEAR_STEPS = 16
"""Constant steps per linear segment (fewer for segments shorter than :data:`LINEAR_MIN_STEP`)."""

LINEAR_MIN_STEP = 1024
"""Shortest step of a linear ramp, in the schedule's unit."""

SHOWN_BREAKPOINTS = 16
"""Schedules with more breakpoints are fingerprinted by digest only, so checkpoints stay small."""

Unit = Literal["samples", "tokens"]
Interpolation = Literal["step", "linear"]


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


class MixtureSchedule:
    """Weights per dataset name at breakpoints of progress (see the module docstring).

    Args:
        breakpoints: ``(position, {name: weight})`` pairs; the first at position 0, positions
            strictly increasing; weights non-negative, at least one positive per breakpoint (they
            are normalised).
        unit: what positions count: ``"samples"`` or ``"tokens"`` drawn from all datasets together.
        interpolate: ``"step"`` or ``"linear"``.

    Raises:
        ConfigError: naming the breakpoint at fault.
    """

    def __init__(
        self,
        breakpoints: Sequence[tuple[int | float, Mapping[str, float]]],
        unit: Unit = "samples",
        interpolate: Interpolation = "step",
    ) -> None:
        if unit not in ("samples", "tokens"):
            raise ConfigError(f"MixtureSchedule: unit must be 'samples' or 'tokens', got {unit!r}")
        if interpolate not in ("step", "linear"):
            raise ConfigError(f"MixtureSchedule: interpolate must be 'step' or 'linear', got {interpolate!r}")
        points: list[tuple[int, dict[str, float]]] = []
        for i, item in enumerate(breakpoints):
            if not isinstance(item, (tuple, list)) or len(item) != 2 or not isinstance(item[1], Mapping):
                raise ConfigError(f"MixtureSchedule: breakpoint {i} must be (position, {{name: weight}}), got {item!r}")
            pos, weights = item
            if not _number(pos) or pos < 0 or int(pos) != pos:
                raise ConfigError(f"MixtureSchedule: breakpoint {i} position must be a whole number >= 0, got {pos!r}")
            if points and int(pos) <= points[-1][0]:
                raise ConfigError(
                    f"MixtureSchedule: breakpoint {i} at {pos} is not after breakpoint {i - 1} at {points[-1][0]}"
                )
            clean = check_weights(weights, f"MixtureSchedule: breakpoint {i}")
            points.append((int(pos), clean))
        if not points:
            raise ConfigError("MixtureSchedule needs at least one breakpoint")
        if points[0][0] != 0:
            raise ConfigError(f"MixtureSchedule: the first breakpoint must be at 0, got {points[0][0]}")
        self.breakpoints = points
        self.unit: Unit = unit
        self.interpolate: Interpolation = interpolate

    @property
    def names(self) -> list[str]:
        """Every dataset name the schedule mentions, in order of first mention."""
        seen: dict[str, None] = {}
        for _, w in self.breakpoints:
            seen.update(dict.fromkeys(w))
        return list(seen)

    def weights_at(self, position: float) -> dict[str, float]:
        """The normalised weights at ``position`` (in :attr:`unit`), as the schedule defines them."""
        names = self.names
        i = max(j for j, (p, _) in enumerate(self.breakpoints) if p <= position)
        w = self._vector(i, names)
        if self.interpolate == "linear" and i + 1 < len(self.breakpoints):
            lo, hi = self.breakpoints[i][0], self.breakpoints[i + 1][0]
            f = (position - lo) / (hi - lo)
            w = [(1 - f) * a + f * b for a, b in zip(w, self._vector(i + 1, names))]
        total = sum(w)
        return {n: x / total for n, x in zip(names, w)}

    def _vector(self, i: int, names: Sequence[str]) -> list[float]:
        w = self.breakpoints[i][1]
        total = sum(w.values())
        return [w.get(n, 0.0) / total for n in names]

    def unit_pieces(self, names: Sequence[str]) -> list[tuple[int, list[float]]]:
        """Pieces of constant weight in :attr:`unit`: ``(start, weights in names order)``."""
        out: list[tuple[int, list[float]]] = []
        for i, (pos, _) in enumerate(self.breakpoints):
            w = self._vector(i, names)
            last = i + 1 == len(self.breakpoints)
            if self.interpolate == "step" or last:
                out.append((pos, w))
                continue
            nxt = self._vector(i + 1, names)
            length = self.breakpoints[i + 1][0] - pos
            steps = max(1, min(LINEAR_STEPS, length // LINEAR_MIN_STEP))
            for j in range(steps):
                f = (j + 0.5) / steps
                out.append((pos + j * length // steps, [(1 - f) * a + f * b for a, b in zip(w, nxt)]))
        return out

    def pieces(
        self, names: Sequence[str], tokens_per_sample: Mapping[str, float] | None = None
    ) -> list[tuple[int, list[float]]]:
        """Pieces of constant *sample* weights over global sample positions, for datasets ``names``.

        With ``unit="tokens"`` each piece's token weights become sample weights (weight divided by
        tokens per sample) and its length in tokens becomes a length in samples at the piece's
        mean tokens per sample, accumulated exactly and rounded once per breakpoint.
        """
        unit_pieces = self.unit_pieces(names)
        if self.unit == "samples":
            return unit_pieces
        if tokens_per_sample is None:
            raise ConfigError(
                "a MixtureSchedule with unit='tokens' needs token estimates: add a tokenizer operator to the "
                "pipeline or pass tokens_per_sample= to the source"
            )
        tps = [float(tokens_per_sample[n]) for n in names]
        out: list[tuple[int, list[float]]] = []
        samples = 0.0
        for k, (start, w) in enumerate(unit_pieces):
            per_token = sum(wi / t for wi, t in zip(w, tps))  # samples per token in this piece
            out.append((round(samples), [wi / t / per_token for wi, t in zip(w, tps)]))
            if k + 1 < len(unit_pieces):
                samples += (unit_pieces[k + 1][0] - start) * per_token
        return out

    def describe(self) -> dict[str, Any]:
        """JSON-able identity; long schedules by digest only (the checkpoint stores the definition)."""
        blob = json.dumps(self.breakpoints, sort_keys=True, separators=(",", ":")).encode()
        out: dict[str, Any] = {
            "unit": self.unit,
            "interpolate": self.interpolate,
            "breakpoints": len(self.breakpoints),
            "sha256": hashlib.sha256(blob).hexdigest(),
        }
        if len(self.breakpoints) <= SHOWN_BREAKPOINTS:
            out["points"] = [[p, {k: float(v) for k, v in sorted(w.items())}] for p, w in self.breakpoints]
        return out

    def __repr__(self) -> str:
        return f"MixtureSchedule({len(self.breakpoints)} breakpoints, unit={self.unit!r}, interpolate={self.interpolate!r})"


def check_weights(weights: Any, what: str) -> dict[str, float]:
    """Validate ``{name: weight}``: non-negative finite numbers, at least one positive."""
    if not isinstance(weights, Mapping) or not weights:
        raise ConfigError(f"{what}: weights must be a non-empty dict of dataset name -> weight, got {weights!r}")
    clean: dict[str, float] = {}
    for name, w in weights.items():
        if not isinstance(name, str) or not _number(w) or w < 0:
            raise ConfigError(f"{what}: weight of {name!r} must be a finite number >= 0, got {w!r}")
        clean[name] = float(w)
    if not any(v > 0 for v in clean.values()):
        raise ConfigError(f"{what}: at least one weight must be positive, got {clean}")
    return clean
