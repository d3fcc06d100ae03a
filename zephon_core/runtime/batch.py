"""The batch stage: the kernel's last step, which cuts each lane's records into fixed-size microbatches.

It does not reset at flush sentinels (microbatch shapes must stay constant), so a microbatch may span
two windows. Each lane's :class:`~zephon_core.runtime.replay.ReplayCursor` drops the records a resumed
lane already delivered and stamps every microbatch with the position just after it. A ``map_batch``
function's ``rng`` derives from the microbatch's first record key, so it is the same wherever and
whenever the microbatch is made (on any runner, in any group: :mod:`zephon_core.runtime.groups`).
"""

from __future__ import annotations

import queue
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from zephon_core.defaults.operators.mapping import sample_rng
from zephon_core.errors import ConfigError, OperatorError
from zephon_core.hashing import mix64
from zephon_core.ops.contract import Lineage, Payload, Records, Traits, Work, callable_name, check_timeout
from zephon_core.runtime.context import Context
from zephon_core.runtime.flow import ByteQueue
from zephon_core.runtime.groups import failed_microbatch, group_microbatches, mark_microbatch, split_groups
from zephon_core.runtime.messages import Message
from zephon_core.runtime.replay import LaneStart, ReplayCursor, ResumePoint
from zephon_core.runtime.runners import Executor, runner_crosses_processes
from zephon_core.runtime.stage import Pending, Stage
from zephon_core.runtime.types import SampleBatch

Collate = Callable[[list[Payload]], dict[str, np.ndarray]]


@dataclass(frozen=True, slots=True)
class MicrobatchMeta:
    """Carried past the worker with each microbatch: its number in the lane and where the lane resumes after it."""

    index: int
    resume: ResumePoint


class BatchAccumulator:
    """Collects one lane's rows; emits a microbatch work item whenever ``size`` rows are held."""

    def __init__(self, size: int, start: LaneStart, keyed: bool = False) -> None:
        self.size = size
        self.keyed = keyed  # the task carries the first record's key (for map_batch's rng)
        self.cursor = ReplayCursor(start)
        self.index = start.delivered
        self.rows = Records.empty()

    @property
    def held(self) -> int:
        """Rows waiting for a full microbatch (left over if the lane ends now)."""
        return len(self.rows.payloads)

    def push(self, records: Records, window: int) -> list[Work]:
        start = self.cursor.admit(len(records), window)
        rows = self.rows
        if start == 0:
            rows.dropped.extend(records.dropped)
        rows.payloads.extend(records.payloads[start:])
        rows.keys.extend(records.keys[start:])
        rows.lineage.extend(records.lineage[start:])
        return self._cut(partial=False)

    def finish(self) -> list[Work]:
        """The lane ended: its held rows as one last, partial microbatch (``batch(drop_last=False)``)."""
        return self._cut(partial=True)

    def _cut(self, partial: bool) -> list[Work]:
        """Every full microbatch held (``partial``: and the rest), cut by offset before the remainder is kept
        once: re-slicing what is left after each microbatch would copy a message's rows once per microbatch."""
        payloads, keys, lineage, dropped = self.rows.payloads, self.rows.keys, self.rows.lineage, self.rows.dropped
        held, at = len(payloads), 0
        out: list[Work] = []
        while held - at >= self.size or (partial and at < held):
            end = min(at + self.size, held)
            meta = MicrobatchMeta(self.index, self.cursor.position(held - end))
            task = (payloads[at:end], keys[at]) if self.keyed else payloads[at:end]
            out.append(Work(task, keys[at:end], lineage[at:end], dropped, meta))
            dropped = []
            self.index += 1
            at = end
        if out:
            self.rows = Records(payloads[at:], keys[at:], lineage[at:])
        return out


def _fields_differ(rows: list[Payload], bad: int) -> ConfigError:
    """The error for row ``bad`` lacking a field row 0 has (typically datasets with different columns); its
    ``index`` is ``bad``, so the error names that row's samples: with a mixture, which dataset differs."""
    first, row = rows[0], rows[bad]
    missing = sorted(set(first) - set(row))
    only_row = sorted(set(row) - set(first))
    extra = f", and has {only_row} that row 0 has not" if only_row else ""
    err = ConfigError(
        f"batch: row {bad} has no field {missing[0]!r}: rows of one microbatch must have the same fields, but row 0 "
        f"has {sorted(first)} and row {bad} has {sorted(row)} (row {bad} lacks {missing}{extra}); to mix datasets "
        "with different fields, read the same fields from every dataset (Dataset.from_path(..., columns=[...]) for "
        "Parquet, Arrow, Lance and Vortex, fields=[...] for JSONL and WebDataset), make the rows alike with a "
        "map_transform that selects or renames fields, or pass batch(collate=...)"
    )
    err.index = bad
    return err


def _mixed_types(key: str, values: list[Any]) -> ConfigError:
    """The error for a field numpy cannot stack into one typed array (a label as int here, as str there),
    naming the first odd row."""
    types = sorted({type(v).__name__ for v in values})
    t0 = type(values[0])
    odd = next((i for i, v in enumerate(values) if type(v) is not t0), None)
    where = f"; row 0 holds {t0.__name__}, row {odd} {type(values[odd]).__name__}" if odd is not None else ""
    err = ConfigError(
        f"batch: field {key!r} holds values of mixed or unsupported types ({', '.join(types)}{where}): make them one "
        "type with a map_transform (or drop the field there), or pass batch(collate=...)"
    )
    if odd is not None:
        err.index = odd
    return err


def default_collate(rows: list[Payload]) -> dict[str, np.ndarray]:
    """Stack each field of the rows into one array; strings become a fixed-width unicode array."""
    out: dict[str, np.ndarray] = {}
    for key in rows[0]:
        try:
            values = [r[key] for r in rows]
        except KeyError:
            raise _fields_differ(rows, next(i for i, r in enumerate(rows) if key not in r)) from None
        if isinstance(values[0], (np.ndarray, list, tuple)):
            arrays = [np.asarray(v) for v in values]
            shapes = {a.shape for a in arrays}
            if len(shapes) > 1:
                raise ConfigError(
                    f"batch: field {key!r} has rows of different shapes {sorted(shapes)[:4]}; "
                    "pack or pad them to one length first (e.g. pack_sequences), or pass collate="
                )
            out[key] = np.stack(arrays)
        else:
            out[key] = np.asarray(values)
            if out[key].dtype == object:
                raise _mixed_types(key, values)
    return out


@dataclass(frozen=True, slots=True)
class BatchMap:
    """A function over collated microbatches (``Pipeline.map_batch``); ``rng_base`` is set when it takes ``rng``."""

    fn: Callable[..., dict[str, np.ndarray]]
    name: str
    rng_base: int | None = None


@dataclass(frozen=True, slots=True)
class CollateWorker:
    """The batch stage's worker: a group of microbatches' rows in, one dict of arrays per microbatch out,
    each collated and mapped on its own (so independent of its group); a failure is re-raised marked with
    its microbatch (:func:`~zephon_core.runtime.groups.mark_microbatch`)."""

    fn: Collate
    maps: tuple[BatchMap, ...] = ()

    def __call__(self, task: tuple[Any, ...]) -> list[dict[str, np.ndarray]]:
        keyed = any(m.rng_base is not None for m in self.maps)
        outs: list[dict[str, np.ndarray]] = []
        for j, one in enumerate(task):
            try:
                rows, key = one if keyed else (one, 0)
                out = self.fn(rows)
                for m in self.maps:
                    rng = sample_rng(m.rng_base, mix64(key, len(rows))) if m.rng_base is not None else None
                    out = m.fn(out) if rng is None else m.fn(out, rng=rng)
                    if not isinstance(out, dict):
                        raise ConfigError(
                            f"map_batch {m.name!r} must return a dict of arrays, got {type(out).__name__}"
                        )
            except BaseException as exc:
                mark_microbatch(exc, j)
                raise
            outs.append(out)
        return outs


class BatchSpec:
    """How the batch stage runs: ``Pipeline.batch(microbatch_size, collate, parallelism=, runner=)``.

    Args:
        microbatch_size: rows per microbatch; a lane's last, partial microbatch is left over.
        collate: ``rows -> dict of arrays``; default stacks each field.
        parallelism: collation workers.
        runner: where collation runs (default: see :meth:`default_runner`).
        timeout_s: limit for one microbatch's collation (default: the pipeline's ``timeout_s`` option).
        drop_last: False delivers each lane's last rows as a final, smaller microbatch instead of leaving
            them over: a function of the lane's data, the same on every world size and after any resume
            (delivered, like any round, only if every lane of the last round has a microbatch).
    """

    name = "batch"
    kind = "batch"
    traits = Traits(fanout="one", stateful=True, resets_on_flush=False)

    def __init__(
        self,
        microbatch_size: int,
        collate: Collate | None = None,
        *,
        parallelism: int = 1,
        runner: str | None = None,
        timeout_s: float | None = None,
        drop_last: bool = True,
    ) -> None:
        if not isinstance(drop_last, bool):
            raise ConfigError(f"batch: drop_last must be True or False, got {drop_last!r}")
        for what, n in (("microbatch_size", microbatch_size), ("parallelism", parallelism)):
            if not isinstance(n, int) or isinstance(n, bool) or n < 1:
                raise ConfigError(f"batch: {what} must be an int >= 1, got {n!r}")
        if collate is not None and not callable(collate):
            raise ConfigError(f"batch: collate must be callable, got {type(collate).__name__}")
        self.microbatch_size = microbatch_size
        self.collate: Collate = collate or default_collate
        self.maps: tuple[BatchMap, ...] = ()
        self.drop_last, self.parallelism, self.runner = drop_last, parallelism, runner
        self.timeout_s = check_timeout(timeout_s, "batch")

    @property
    def reads_rows_only(self) -> bool:
        """Whether collation never changes the rows it is given (the default collation makes new arrays), so
        the fetch stage may hand it a reader's own rows (:meth:`~zephon_core.runtime.fetch.FetchStage.bind`)."""
        return self.collate is default_collate

    def add_map(self, fn: Callable[..., dict[str, np.ndarray]], name: str, rng_base: int | None) -> None:
        """Run ``fn`` on every collated microbatch, after collation and earlier maps."""
        self.maps = (*self.maps, BatchMap(fn, name, rng_base))

    def config(self) -> dict[str, Any]:
        out: dict[str, Any] = {"microbatch_size": self.microbatch_size, "collate": callable_name(self.collate)}
        if not self.drop_last:
            out["drop_last"] = False
        if self.maps:  # only when used, so the fingerprint of a plain batch stays what it was
            out["maps"] = [
                {"fn": callable_name(m.fn), "name": m.name, "rng": m.rng_base is not None} for m in self.maps
            ]
        return out

    def describe(self) -> dict[str, Any]:
        return {"kind": "batch", "name": "batch", "config": self.config()}

    def default_runner(
        self, pipeline_runner: str, crosses_processes: Callable[[str], bool] = runner_crosses_processes
    ) -> str:
        """Where collation runs when ``batch(runner=...)`` is not given: the pipeline's runner, except that
        the default collation (numpy stacking, which releases the GIL) with no ``map_batch`` stays on threads
        when ``crosses_processes(pipeline_runner)``: sending rows out and arrays back costs two more copies."""
        if self.collate is default_collate and not self.maps and crosses_processes(pipeline_runner):
            return "threads"
        return pipeline_runner

    def new_accumulator(self, lane: int, start: LaneStart | None = None) -> BatchAccumulator:
        keyed = any(m.rng_base is not None for m in self.maps)
        return BatchAccumulator(self.microbatch_size, start or LaneStart(), keyed)

    def worker(self) -> CollateWorker:
        return CollateWorker(self.collate, self.maps)


class BatchStage(Stage):
    """The terminal stage: per-lane batch accumulators that start where the checkpoint says; its work items
    are groups (:func:`~zephon_core.runtime.groups.group_microbatches`), ``meta`` their microbatches' items."""

    def __init__(
        self,
        spec: BatchSpec,
        executor: Executor | None,
        inbound: queue.Queue[Message],
        outbound: queue.Queue[Message],
        ctx: Context,
        window: int,
        *,
        starts: Mapping[int, LaneStart],
        view: Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]] | None,
        describe_samples: Callable[[list[Lineage]], str],
        runner: str = "",
        timeout_s: float | None = None,
        parallelism: int = 1,
    ) -> None:
        super().__init__(
            spec,
            executor,
            inbound,
            outbound,
            ctx,
            window,
            describe_samples=describe_samples,
            runner=runner,
            timeout_s=timeout_s,
            parallelism=parallelism,
        )
        self.batch, self.starts, self.view = spec, starts, view
        self.lanes: dict[int, BatchAccumulator] = {}

    def _lane(self, lane: int) -> BatchAccumulator:
        acc = self.lanes.get(lane)
        if acc is None:
            acc = self.lanes[lane] = self.batch.new_accumulator(lane, self.starts.get(lane))
        return acc

    def _on_data(self, msg: Message) -> None:
        emitted = self._timed("accumulator", msg, self._lane(msg.lane).push, msg.body, msg.window)
        if emitted:  # in groups, one task each (bytes per record: the inbound queue's running mean)
            per = self.inbound.bytes_per_record if isinstance(self.inbound, ByteQueue) else 0.0
            self._submit(msg, split_groups(emitted, per))

    def _on_flush(self, msg: Message) -> None:
        self._lane(msg.lane).cursor.close_window(msg.window)
        super()._on_flush(msg)

    def _on_lane_end(self, msg: Message) -> None:
        acc = self.lanes.pop(msg.lane, None)
        if acc is not None and not self.batch.drop_last and acc.held:
            self._submit(msg, [group_microbatches(acc.finish())])
        self.ctx.put(self.pending, Pending(msg.with_body(acc.held if acc is not None else 0)))

    def _convert(self, msg: Message, result: Any, work: Work) -> tuple[SampleBatch, ...]:
        """A group's collated arrays as its microbatches, in order (the multiplexer takes the tuple)."""
        parts: tuple[Work, ...] = work.meta
        if not isinstance(result, list) or len(result) != len(parts):  # a runner lost or added results
            got = len(result) if isinstance(result, list) else type(result).__name__
            err = TypeError(f"collation returned {got} outputs for {len(parts)} microbatches")
            raise self._error("worker", msg.lane, work.lineage, err)
        lane, view = msg.lane, self.view
        return tuple(
            SampleBatch(lane, w.meta.index, d, w.lineage, w.dropped, w.meta.resume, view) for w, d in zip(parts, result)
        )

    def _error(
        self, what: str, lane: int, lineage: list[Lineage], exc: BaseException, work: Work | None = None
    ) -> OperatorError:
        """As :meth:`Stage._error`, naming only the samples of the microbatch whose collation failed."""
        j = failed_microbatch(exc)
        if j is not None and work is not None and 0 <= j < len(work.meta):
            lineage = work.meta[j].lineage
        return super()._error(what, lane, lineage, exc, work)

    def _records(self, body: Any) -> int:
        return sum(len(b) for b in body)

    def _units(self, work: Work) -> int:
        """A group's time limit is ``timeout_s`` per microbatch in it."""
        return len(work.meta)
