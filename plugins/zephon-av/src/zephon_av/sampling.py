"""Which part of a clip to take and which frames: pure integer arithmetic on the stream's timestamps.

Everything is computed in ticks of the stream's time base (integers) and exact fractions, so the
choice depends only on the file and the record's random draw, never on float rounding.

* **Window.** The whole clip ``[first_pts, end_pts)`` or, with ``clip_seconds``, a window of that
  length starting at ``first_pts + floor(u * (duration - window))``: ``u`` is the record's draw in
  ``[0, 1)`` for ``clip_start="random"``, ``0`` for ``"start"``, ``1/2`` for ``"center"``. A clip
  shorter than the window is taken whole.
* **Count.** ``num_frames`` or, with ``fps``, ``round(window_seconds * fps / frame_factor) *
  frame_factor`` (Qwen2-VL's rule); at least ``min_frames``, at most ``max_frames`` and the number
  of frames in the window; then floored to a multiple of ``frame_factor`` (the temporal patch) and
  never below it.
* **Frames.** The window is cut into ``k`` equal segments; frame ``j`` is the frame on screen at
  the centre of segment ``j`` (the last one whose timestamp is at or before it). For a constant
  frame rate that is the uniform choice; for a variable one it is uniform in time, not in index.
  A window holding fewer frames than ``frame_factor`` repeats frames.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

CLIP_STARTS = ("random", "start", "center")


@dataclass(frozen=True)
class FramePolicy:
    """How many frames to take, and from which window (module docstring)."""

    fps: float | None
    num_frames: int | None
    clip_seconds: float | None
    clip_start: str
    min_frames: int
    max_frames: int | None
    frame_factor: int


def window(first: int, end: int, time_base: Fraction, clip_seconds: float | None, u: Fraction) -> tuple[int, int]:
    """``(start, length)`` in ticks of ``time_base`` of the window to sample from (module docstring)."""
    duration = max(1, end - first)
    if clip_seconds is None:
        return first, duration
    length = max(1, int(Fraction(clip_seconds) / time_base))
    if length >= duration:
        return first, duration
    return first + int(u * (duration - length)), length


def draw(clip_start: str, rng: np.random.Generator | None) -> Fraction:
    """The window's relative start ``u`` in ``[0, 1)`` (exact: a float's value as a fraction)."""
    if clip_start == "random":
        assert rng is not None, "clip_start='random' needs the per-record generator"
        return Fraction(float(rng.random()))
    return Fraction(1, 2) if clip_start == "center" else Fraction(0)


def frame_count(policy: FramePolicy, length: int, time_base: Fraction, available: int) -> int:
    """How many frames to take from a window of ``length`` ticks holding ``available`` frames."""
    factor = policy.frame_factor
    if policy.num_frames is not None:
        k = policy.num_frames
    else:
        assert policy.fps is not None
        k = round(length * time_base * Fraction(policy.fps) / factor) * factor
    k = max(k, policy.min_frames)
    if policy.max_frames is not None:
        k = min(k, policy.max_frames)
    k = min(k, available)
    return max(factor, k // factor * factor)


def select(pts: np.ndarray, end: int, time_base: Fraction, policy: FramePolicy, u: Fraction) -> np.ndarray:
    """Positions (into the sorted presentation timestamps ``pts``) of the frames to take, in order."""
    first = int(pts[0])
    start, length = window(first, end, time_base, policy.clip_seconds, u)
    lo, hi = np.searchsorted(pts, [start, start + length], side="left")
    available = max(1, int(hi - lo))
    k = frame_count(policy, length, time_base, available)
    centres = start + ((2 * np.arange(k, dtype=np.int64) + 1) * length) // (2 * k)  # floor of the exact centre
    positions = np.searchsorted(pts, centres, side="right") - 1
    return np.clip(positions, 0, len(pts) - 1).astype(np.int64)
