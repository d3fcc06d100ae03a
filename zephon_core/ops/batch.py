"""``batch``: the terminal operator that cuts each lane's records into fixed-size microbatches.

Unlike every other operator it does not reset at flush sentinels (microbatch shapes must stay
constant), so a microbatch may span two windows. It therefore also owns the resume bookkeeping:
each microbatch records *where the lane stands after it* as ``(window, records into that window)``.
Replaying a lane from that window and skipping that many records reproduces the rest exactly,
because every operator before ``batch`` starts each window from a fresh state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from zephon_core.errors import ConfigError
from zephon_core.ops.contract import (
    Accumulator,
    Emitted,
    Operator,
    Payload,
    Records,
    Traits,
    Work,
    WorkerFn,
    callable_name,
)


@dataclass(frozen=True, slots=True)
class ResumePoint:
    """After this microbatch, the lane resumes by replaying ``window`` and skipping ``skip`` records."""

    window: int
    skip: int


class BatchAccumulator(Accumulator):
    """Collects rows per lane; ``flush`` only advances the window counter (rows are kept)."""

    def __init__(self, size: int, window: int = 0, skip: int = 0, index: int = 0) -> None:
        self.size = size
        self.window = window
        self.offset = 0
        self.to_skip = skip
        self.index = index
        self.rows = Records.empty()

    def push(self, records: Records) -> list[Emitted]:
        n = len(records)
        start = 0
        if self.to_skip:
            start = min(self.to_skip, n)
            self.to_skip -= start
            self.offset += start
        rows = self.rows
        if start == 0:
            rows.dropped.extend(records.dropped)
        rows.payloads.extend(records.payloads[start:])
        rows.keys.extend(records.keys[start:])
        rows.lineage.extend(records.lineage[start:])
        self.offset += n - start
        out: list[Emitted] = []
        b = self.size
        while len(rows.payloads) >= b:
            remaining = len(rows.payloads) - b
            meta = (self.index, ResumePoint(self.window, self.offset - remaining))
            out.append(Work(rows.payloads[:b], rows.keys[:b], rows.lineage[:b], rows.dropped, meta))
            self.index += 1
            self.rows = rows = Records(rows.payloads[b:], rows.keys[b:], rows.lineage[b:])
        return out

    def flush(self) -> list[Emitted]:
        self.window += 1
        self.offset = 0
        return []

    def state(self) -> Any:
        return {"window": self.window, "offset": self.offset, "rows": len(self.rows.payloads)}


def default_collate(rows: list[Payload]) -> dict[str, np.ndarray]:
    """Stack each field of the rows into one array; strings become a fixed-width unicode array."""
    first = rows[0]
    out: dict[str, np.ndarray] = {}
    for key in first:
        try:
            values = [r[key] for r in rows]
        except KeyError:
            bad = next(i for i, r in enumerate(rows) if key not in r)
            raise ConfigError(f"batch: row {bad} has no field {key!r} (row 0 has {sorted(first)})") from None
        v0 = values[0]
        if isinstance(v0, np.ndarray) or isinstance(v0, (list, tuple)):
            arrays = [np.asarray(v) for v in values]
            shapes = {a.shape for a in arrays}
            if len(shapes) > 1:
                raise ConfigError(
                    f"batch: field {key!r} has rows of different shapes {sorted(shapes)[:4]}; "
                    "pack or pad them to one length first (e.g. pack_sequences), or pass collate="
                )
            out[key] = np.stack(arrays)
        else:
            arr = np.asarray(values)
            if arr.dtype == object:
                raise ConfigError(f"batch: field {key!r} holds values of mixed or unsupported types")
            out[key] = arr
    return out


@dataclass(frozen=True, slots=True)
class _Collate:
    fn: Callable[[list[Payload]], dict[str, np.ndarray]]

    def __call__(self, rows: list[Payload]) -> list[dict[str, np.ndarray]]:
        return [self.fn(rows)]


class Batch(Operator):
    """Group each lane's records into microbatches of ``microbatch_size`` rows.

    Args:
        microbatch_size: rows per microbatch; a lane's last, partial microbatch is left over.
        collate: ``rows -> dict of arrays``; default stacks each field.
    """

    kind = "batch"
    traits = Traits(fanout="one", stateful=True, resets_on_flush=False)

    def __init__(
        self, microbatch_size: int, collate: Callable[[list[Payload]], dict[str, np.ndarray]] | None = None, **kw: Any
    ) -> None:
        if not isinstance(microbatch_size, int) or microbatch_size < 1:
            raise ConfigError(f"batch: microbatch_size must be an int >= 1, got {microbatch_size!r}")
        super().__init__(**kw)
        self.microbatch_size = microbatch_size
        self.collate = collate or default_collate

    def config(self) -> dict[str, Any]:
        return {"microbatch_size": self.microbatch_size, "collate": callable_name(self.collate)}

    def new_accumulator(self, lane: int, window: int = 0, skip: int = 0, index: int = 0) -> BatchAccumulator:
        return BatchAccumulator(self.microbatch_size, window, skip, index)

    def worker(self) -> WorkerFn:
        return _Collate(self.collate)
