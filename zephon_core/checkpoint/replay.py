"""Replay: the one place that knows how a lane resumes from a checkpoint (next to the format it reads).

Every operator before ``batch`` starts each window (``K`` chunks of a lane, closed by a flush
sentinel) fresh, so a lane resumes by replaying the window its last delivered microbatch ended in,
skipping what the training loop already consumed of it. A :class:`LaneStart` says ``window`` (its
first chunk is ``window · K``), ``skip`` (its records, as they reach ``batch``, already delivered)
and ``delivered`` (the lane's microbatches delivered: the next one's ``lane_index``). The terminal
stage's :class:`ReplayCursor` drops the ``skip`` records and stamps every microbatch with the
:class:`ResumePoint` after it; :func:`lane_state` turns the last one into checkpoint data."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from zephon_core.errors import CheckpointError
from zephon_core.work.lanes import LaneLayout


@dataclass(frozen=True, slots=True)
class ResumePoint:
    """After a microbatch, its lane resumes by replaying ``window`` and skipping ``skip`` records."""

    window: int
    skip: int


@dataclass(frozen=True, slots=True)
class LaneStart:
    """Where a lane begins (see the module docstring); the default is the start of the data."""

    window: int = 0
    skip: int = 0
    delivered: int = 0

    @property
    def resume(self) -> ResumePoint:
        return ResumePoint(self.window, self.skip)

    def first_chunk(self, flush_every: int) -> int:
        """The lane-local index of the first chunk to replay."""
        return self.window * flush_every

    @classmethod
    def from_state(cls, lane: int | str, state: Any) -> LaneStart:
        """Read one lane's checkpoint entry; every field must be a non-negative int (bool is not), or a
        :class:`CheckpointError` names the lane and the field at fault."""
        if not isinstance(state, Mapping):
            raise CheckpointError(f"checkpoint lane {lane}: expected a dict, got {type(state).__name__}")
        for f in ("window", "skip", "delivered"):
            v = state.get(f)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise CheckpointError(f"checkpoint lane {lane}: field {f!r} must be a non-negative int, got {v!r}")
        return cls(state["window"], state["skip"], state["delivered"])


class ReplayCursor:
    """One lane's position at the terminal stage: the skip filter and each microbatch's resume point.
    Records arrive tagged with their window; the cursor counts them per window, drops the first
    ``start.skip`` of the start window, and says where the lane resumes after any admitted prefix."""

    __slots__ = ("_start", "_to_skip", "offset", "window")

    def __init__(self, start: LaneStart) -> None:
        self._start = start
        self._to_skip = start.skip
        self.window, self.offset = start.window, 0

    def admit(self, count: int, window: int) -> int:
        """``count`` records of ``window`` arrive; returns how many leading ones to drop (replayed ones).
        A :class:`CheckpointError` if the checkpoint asked to skip more records than its window held, or
        data of an earlier window arrived (the checkpoint does not belong to this data)."""
        if window != self.window:
            if window < self.window:
                raise CheckpointError(
                    f"replay reached window {window} after window {self.window}: the checkpoint does not match the data"
                )
            self._check_skipped()
            self.window, self.offset = window, 0
        drop = min(self._to_skip, count)
        self._to_skip -= drop
        self.offset += count
        return drop

    def close_window(self, window: int) -> None:
        """The sentinel closing ``window`` went by: skipping must be complete by now."""
        if window >= self.window:
            self._check_skipped()

    def position(self, held: int) -> ResumePoint:
        """The resume point after every admitted record except the ``held`` last ones."""
        return ResumePoint(self.window, self.offset - held)

    def _check_skipped(self) -> None:
        if self._to_skip:
            s = self._start
            raise CheckpointError(
                f"checkpoint says to skip {s.skip} records of window {s.window}, but that window holds only "
                f"{s.skip - self._to_skip}: the checkpoint does not belong to this data or pipeline"
            )


def lane_state(lane: int, resume: ResumePoint, delivered: int, layout: LaneLayout, flush_every: int) -> dict[str, Any]:
    """One lane's checkpoint entry (plain JSON, the same at the same step of the same run): ``resume`` of
    the last microbatch delivered (or the lane's start); ``flush_every`` chunks per window (0: one window)."""
    chunk = layout.chunk(lane, resume.window * flush_every)
    return {"window": resume.window, "skip": resume.skip, "delivered": delivered, "replay_from_chunk": chunk}
