"""Groups of microbatches: the microbatches cut from one message travel as one task and one hop.

With small records the batch stage's cost is per microbatch, not per row (a future, a window entry,
a queue put and get and a thread wake-up each), so it pays it once per group instead. Each microbatch
is still collated on its own, so batches and their hashes do not depend on the grouping.
"""

from __future__ import annotations

import contextlib
import itertools
from typing import Protocol, cast, runtime_checkable

from zephon_core.ops.contract import Work


@runtime_checkable
class MicrobatchFailure(Protocol):
    """A collation failure marked with the microbatch (within its group) that raised it; see :func:`mark_microbatch`."""

    zephon_microbatch: int


def mark_microbatch(exc: BaseException, j: int) -> None:
    """Mark ``exc`` with the number of the microbatch (within its group) whose collation raised it, as an
    attribute that pickles with it; a type that refuses attributes is reported for the whole group."""
    with contextlib.suppress(AttributeError):
        cast(MicrobatchFailure, exc).zephon_microbatch = j


def failed_microbatch(exc: BaseException) -> int | None:
    """The microbatch (within its group) that :func:`mark_microbatch` marked ``exc`` with, or None."""
    j = exc.zephon_microbatch if isinstance(exc, MicrobatchFailure) else None
    return j if isinstance(j, int) and not isinstance(j, bool) else None


GROUP_ROWS = 64
GROUP_BYTES = 256 * 1024
"""A group of microbatches (one collation task, one hop) is closed at this many rows or input bytes.

A hop costs tens of microseconds, well under a microsecond per row over 64 rows. A larger group keeps
more collated arrays alive, which the allocator hands back and faults in again: on 1 KB text, groups of
128 rows took a page fault per 3 to 10 samples (64 rows: one per 25), costing more than the hops saved."""


def group_microbatches(works: list[Work]) -> Work:
    """One work item for the microbatches cut from one message: their tasks as one tuple, their keys and
    lineage one after the other, and their own work items as ``meta`` (one SampleBatch each, in order)."""
    keys = list(itertools.chain.from_iterable(w.keys for w in works))
    lineage = list(itertools.chain.from_iterable(w.lineage for w in works))
    return Work(tuple(w.task for w in works), keys, lineage, works[0].dropped, tuple(works))


def split_groups(works: list[Work], bytes_per_record: float) -> list[Work]:
    """The microbatches cut from one message (in order), as groups closed at :data:`GROUP_ROWS` rows
    or :data:`GROUP_BYTES` bytes (``bytes_per_record`` estimates a row's size), each one work item."""
    out: list[Work] = []
    at, n = 0, len(works)
    while at < n:
        end, rows = at + 1, len(works[at].keys)
        while end < n and rows < GROUP_ROWS and rows * bytes_per_record < GROUP_BYTES:
            rows += len(works[end].keys)
            end += 1
        out.append(group_microbatches(works[at:end]))
        at = end
    return out
