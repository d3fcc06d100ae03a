"""``zephon index PATH --validate``: decode every record once, ahead of training, and list the bad ones.

A corrupt record is otherwise found when a run first reads it, which may be hours in. Validation
reads every record of every shard through the format's own reader (so it finds exactly what a run
would find) and reports each one that does not decode by file and position (the reader's message:
byte offset for JSON Lines, row for columnar formats, sample for LitData and MDS). Consecutive
records failing with the same message (a corrupt Parquet row group, a bad zstd frame) are reported
once, with their count. A file that cannot be read at all is reported as a whole.

Shards are validated in parallel worker processes (decoding is CPU-bound and holds the GIL), each
reading its shard in blocks of :data:`BLOCK` records; a block with a bad record is read again one
record at a time to find each bad one.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from zephon_core.errors import ReaderError, RecordError, ZephonError
from zephon_core.work.readers import Reader

BLOCK = 1024
"""Records read per call while validating: large enough to amortise a call, small enough to narrow down."""

PARALLEL_MIN_RECORDS = 250_000
"""Below this many records the default is to validate in this process: starting worker processes
(importing the format's library in each) costs seconds, more than such a dataset takes."""


@dataclass(frozen=True)
class BadRecord:
    """A record (or a run of consecutive records) that does not decode, or a whole unreadable file.

    Attributes:
        shard: the shard's number in the reader's shard list.
        file: the shard's id (its path relative to the dataset root).
        first: the first bad record's index within the shard.
        count: consecutive bad records with the same message (the rest of the shard for a file).
        message: the reader's error, which names the file and the position.
        whole_file: the file itself could not be read (missing, truncated, not this format).
    """

    shard: int
    file: str
    first: int
    count: int
    message: str
    whole_file: bool = False

    def line(self) -> str:
        """The report line: the reader's message, plus the extent of a run of records."""
        if self.whole_file:
            return f"{self.message} (whole file: records {self.first}-{self.first + self.count - 1} not checked)"
        if self.count > 1:
            return f"{self.message} ({self.count} records: {self.first}-{self.first + self.count - 1})"
        return self.message


@dataclass
class ShardReport:
    """What validating one shard found: records checked and the bad ones."""

    shard: int
    records: int
    bad: list[BadRecord] = field(default_factory=list)


@dataclass
class Validation:
    """The result of :func:`validate`.

    Attributes:
        files: shards validated.
        records: records checked.
        bad: every bad record (runs merged) and unreadable file, in shard and record order.
    """

    files: int
    records: int
    bad: list[BadRecord]

    @property
    def bad_records(self) -> int:
        """Records that do not decode (not counting unreadable files)."""
        return sum(b.count for b in self.bad if not b.whole_file)

    @property
    def bad_files(self) -> int:
        """Files that could not be read at all."""
        return sum(1 for b in self.bad if b.whole_file)

    @property
    def ok(self) -> bool:
        return not self.bad


Progress = Callable[[int, int, int, int], None]
"""``progress(files_done, files_total, records_checked, bad_records)``, called after each shard."""


def validate_shard(reader: Reader, shard: int, block: int = BLOCK) -> ShardReport:
    """Decode every record of ``shard``; a ``RecordError`` is a bad record, any other error a bad file."""
    info = reader.shards()[shard]
    report = ShardReport(shard, 0)

    def bad(first: int, message: str, count: int = 1) -> None:
        last = report.bad[-1] if report.bad else None
        if last is not None and not last.whole_file and last.message == message and last.first + last.count == first:
            report.bad[-1] = BadRecord(shard, info.id, last.first, last.count + count, message)
        else:
            report.bad.append(BadRecord(shard, info.id, first, count, message))

    n = info.num_samples
    for start in range(0, n, block):
        idx = np.arange(start, min(n, start + block), dtype=np.int64)
        try:
            try:
                reader.read(shard, idx)
            except RecordError:
                for i in idx.tolist():
                    try:
                        reader.read(shard, np.array([i], dtype=np.int64))
                    except RecordError as exc:
                        bad(i, str(exc))
        except ZephonError as exc:
            report.bad.append(BadRecord(shard, info.id, start, n - start, str(exc), whole_file=True))
            report.records = start
            return report
        except Exception as exc:  # a library fault the reader did not wrap: the file is unreadable
            message = f"{info.id}: {type(exc).__name__}: {exc}"
            report.bad.append(BadRecord(shard, info.id, start, n - start, message, whole_file=True))
            report.records = start
            return report
    report.records = n
    return report


def validate(reader: Reader, *, jobs: int | None = None, progress: Progress | None = None) -> Validation:
    """Validate every shard of ``reader`` (in ``jobs`` worker processes); see the module docstring.

    Args:
        reader: any reader (it must pickle when ``jobs > 1``).
        jobs: worker processes; default: the CPUs, at most one per shard (this process alone below
            :data:`PARALLEL_MIN_RECORDS` records). 1 validates in this process.
        progress: called after each shard (see :data:`Progress`).
    """
    try:
        shards = reader.shards()
    except ZephonError:
        raise
    except Exception as exc:
        raise ReaderError(f"cannot list the dataset's shards: {type(exc).__name__}: {exc}") from exc
    total = len(shards)
    if jobs is None and sum(s.num_samples for s in shards) < PARALLEL_MIN_RECORDS:
        jobs = 1
    jobs = max(1, min(jobs or os.cpu_count() or 1, total))
    reports: list[ShardReport] = []

    def done(report: ShardReport) -> None:
        reports.append(report)
        if progress is not None:
            bad = sum(b.count for r in reports for b in r.bad if not b.whole_file)
            progress(len(reports), total, sum(r.records for r in reports), bad)

    if jobs == 1:
        for s in range(total):
            done(validate_shard(reader, s))
    else:
        with ProcessPoolExecutor(
            jobs, mp_context=_context(), initializer=_init_worker, initargs=(pickle.dumps(reader),)
        ) as pool:
            pending: set[Future[ShardReport]] = {pool.submit(_validate_in_worker, s) for s in range(total)}
            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for fut in finished:
                    done(fut.result())
    reports.sort(key=lambda r: r.shard)
    return Validation(total, sum(r.records for r in reports), [b for r in reports for b in r.bad])


def _context() -> Any:
    """forkserver where available (no fork of a threaded parent), else spawn."""
    return mp.get_context("forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn")


_worker_reader: Reader | None = None


def _init_worker(blob: bytes) -> None:
    global _worker_reader
    _worker_reader = pickle.loads(blob)


def _validate_in_worker(shard: int) -> ShardReport:
    assert _worker_reader is not None
    return validate_shard(_worker_reader, shard)
