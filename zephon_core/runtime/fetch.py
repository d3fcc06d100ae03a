"""The fetch stage: the kernel's first step, which turns chunks of pointers into records.

Its accumulator gives every pointer its identity: a record key (lane-unique, used for hash-derived
draws) and a lineage of one sample id that also names the dataset (:mod:`zephon_core.work.ids`).
Its worker groups a chunk's pointers by (dataset, shard) and reads each group with one
``Reader.read`` call. It is configured with ``Pipeline.fetch(parallelism=..., runner=...)``.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from zephon_core.defaults.sources.static_mixture import Chunk
from zephon_core.errors import ConfigError, ReaderError, ZephonError
from zephon_core.ops.contract import Emitted, Payload, Traits, Work, check_timeout
from zephon_core.work.ids import DATASET_SHIFT, record_key
from zephon_core.work.readers import Reader, SharesRows, SkippingReader


class FetchAccumulator:
    """Keys and lineage for each pointer of a chunk (or part of one); it is read as one work item."""

    def push(self, chunk: Chunk) -> list[Emitted]:
        base = record_key(chunk.number, chunk.offset)
        n = len(chunk)
        keys = list(range(base, base + n))
        # Sample ids in one numpy expression and 1-tuples made by zip in C: the same Python ints as
        # ``((d << DATASET_SHIFT) | k,)`` per record, without a Python loop (ids stay below 2**63).
        ids = (chunk.dataset.astype(np.int64) << DATASET_SHIFT) | np.arange(base, base + n, dtype=np.int64)
        lineage: list[tuple[int, ...]] = list(zip(ids.tolist()))
        return [Work((chunk.dataset, chunk.shard, chunk.index), keys, lineage)]

    def flush(self) -> list[Emitted]:
        return []


@dataclass(frozen=True)
class FetchWorker:
    """Reads a chunk's samples, one reader call per (dataset, shard) group.

    A :class:`~zephon_core.work.readers.SkippingReader` (every :class:`~zephon_core.storage.StorageReader`)
    is read through it, so with its ``on_error="skip"`` a record that does not decode comes back as
    ``None``: the records a run skipped are the fetch stage's dropped lineage, its only tombstones.
    """

    names: tuple[str, ...]
    readers: tuple[Reader, ...]
    share_rows: bool = False
    """Read a :class:`~zephon_core.work.readers.SharesRows` reader's own rows, not copies (see ``FetchStage.bind``)."""
    skips: tuple[bool, ...] = field(init=False)
    """Per reader, whether it is a SkippingReader: asked once, since a runtime-checkable Protocol's
    ``isinstance`` costs tens of microseconds and a chunk is read in several groups."""
    shares: tuple[bool, ...] = field(init=False)
    """Per reader, whether it is read through ``read_shared`` (``share_rows`` and a SharesRows reader)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "skips", tuple(isinstance(r, SkippingReader) for r in self.readers))
        object.__setattr__(self, "shares", tuple(self.share_rows and isinstance(r, SharesRows) for r in self.readers))

    def __call__(self, task: tuple[np.ndarray, np.ndarray, np.ndarray]) -> list[Payload]:
        ds, shard, index = task
        n = len(index)
        if n == 0:
            return []
        if ds[0] == ds[-1] and shard[0] == shard[-1] and (ds == ds[0]).all() and (shard == shard[0]).all():
            # One (dataset, shard) group: the reader's rows, in order, are the output.
            return self._read(int(ds[0]), int(shard[0]), index, 0)
        group = ds.astype(np.int64) << 40 | shard
        order = np.argsort(group, kind="stable")
        bounds = np.flatnonzero(np.diff(group[order])) + 1
        flat: list[Any] = []  # the groups' rows one after the other: row k is for pointer order[k]
        for pos in np.split(order, bounds):
            flat.extend(self._read(int(ds[pos[0]]), int(shard[pos[0]]), index[pos], int(pos[0])))
        inverse = np.empty(n, dtype=np.intp)
        inverse[order] = np.arange(n)
        return list(operator.itemgetter(*inverse.tolist())(flat))  # one gather in C, not a loop per record

    def _read(self, d: int, s: int, index: np.ndarray, first: int) -> list[Any]:
        """One reader call for the pointers ``index`` of dataset ``d``, shard ``s`` (a skipped record: None).

        ``first`` is the task position of the group's first pointer: a failure names that sample.
        """
        reader = self.readers[d]
        read: Callable[[int, np.ndarray], Sequence[Payload | None]]
        if self.shares[d]:
            read = cast(SharesRows, reader).read_shared
        else:
            read = cast(SkippingReader, reader).read_or_skip if self.skips[d] else reader.read
        where = f"dataset {self.names[d]!r}, shard {s}"
        try:
            rows = read(s, index)
        except ZephonError as exc:
            exc.index = first
            raise
        except Exception as exc:
            err = ReaderError(f"{where} ({_shard_name(reader, s)}): {type(exc).__name__}: {exc}")
            err.index = first
            raise err from exc
        if len(rows) != len(index):
            raise ReaderError(f"{where}: reader returned {len(rows)} samples for {len(index)} indices")
        return list(rows)  # a list of its own: a reader may hand out a list it keeps


def _shard_name(reader: Reader, s: int) -> str:
    try:
        return reader.shards()[s].id
    except Exception:
        return "?"


MIN_GROUP = 4  # the fewest pointers read in one work item, however large the records
FIRST_GROUP = 32  # pointers per work item before any record size is known

FETCH_TIMEOUT_S = 300.0
"""Default limit for one chunk's read: storage retries have their own, shorter deadlines; a read that
takes five minutes is a hung read, not a slow one."""


class FetchStage:
    """How fetch runs: its parallelism and runner, and (once bound) the readers of the source's datasets."""

    name = "fetch"
    kind = "fetch"
    traits = Traits(fanout="one", reads_pointers=True)

    def __init__(self, parallelism: int = 1, runner: str | None = None, timeout_s: float | None = None) -> None:
        if not isinstance(parallelism, int) or isinstance(parallelism, bool) or parallelism < 1:
            raise ConfigError(f"fetch: parallelism must be an int >= 1, got {parallelism!r}")
        self.parallelism = parallelism
        self.runner = runner
        self.timeout_s = check_timeout(timeout_s, "fetch")
        self._worker: FetchWorker | None = None
        self._target_bytes: int | None = None
        self._bytes_per_record: Callable[[], float] = lambda: 0.0

    def bind(self, names: Sequence[str], readers: Sequence[Reader], *, share_rows: bool = False) -> None:
        """Give the worker the datasets' readers (done when the pipeline starts).

        ``share_rows``: nothing after fetch changes a row (no operator, a collation that only reads),
        so a reader that can hand out its own rows (:class:`~zephon_core.work.readers.SharesRows`)
        does, without a copy per record (which cost about as much as collating the row).
        """
        self._worker = FetchWorker(tuple(names), tuple(readers), share_rows)

    def limit_group_bytes(self, target_bytes: int | None, bytes_per_record: Callable[[], float]) -> None:
        """Read chunks in groups of about ``target_bytes`` (given the observed bytes per record)."""
        self._target_bytes = target_bytes
        self._bytes_per_record = bytes_per_record

    def group_size(self, n: int) -> int:
        """Pointers per read group (a part of a chunk sent on its own) for a chunk of ``n`` pointers.

        Only how reads are grouped depends on it, never the records, so it may follow the observed
        record size: large records are read in parts that keep each message a small share of the byte
        budget, and the feeder interleaves the lanes part by part.
        """
        if self._target_bytes is None:
            return n
        per = self._bytes_per_record()
        if per <= 0:  # nothing read yet: start small, in case the records are large
            return min(n, FIRST_GROUP)
        return max(MIN_GROUP, min(n, int(self._target_bytes // per)))

    def describe(self) -> dict[str, Any]:
        return {"kind": "fetch", "name": "fetch", "config": {}}

    def new_accumulator(self, lane: int) -> FetchAccumulator:
        return FetchAccumulator()

    def worker(self) -> FetchWorker:
        if self._worker is None:
            raise ConfigError("fetch used before its datasets were bound")
        return self._worker
