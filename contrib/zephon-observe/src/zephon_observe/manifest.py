"""The provenance manifest: which samples every global step held, written while the pipeline runs.

``options(manifest=PATH)`` records, for every microbatch a rank hands to the training loop, its
global step (the lane's microbatch number: microbatch *n* of every lane makes global step *n*), its
lane, its SHA-256 (``SampleBatch.sha256()``, what determinism checks compare) and, for every row, a
64-bit digest of the row's arrays and the ``(dataset, shard, index)`` of every record that made the
row, with the record's token span in the row when it is known (packed rows carry ``document_ids``).
This answers "which samples were in global batch N" after the fact — for a loss spike, a data
audit, or two runs that should have been identical (``zephon manifest diff``).

Layout: one folder per rank, ``PATH/rank-00000/``, holding Parquet files of one row group each,
``part-<session>-<nnnnn>.parquet``. A Parquet file is readable only once its footer is written, at
close, so one ever-growing file per rank would be lost whole by a crash or a preemption (the usual
end of a training job) and overwritten by the resumed run. Instead a part is written every
``manifest_every_steps`` rounds (and at least every :data:`GROUP_SECONDS`), to a temporary name
renamed when complete. ``Pipeline.state_dict()`` writes a part too, so every step before a
checkpoint is on disk: a crash loses only steps after the last checkpoint, which the resumed run
delivers, and records, again in parts of its own beside the old ones. Steps recorded twice (written
before the crash, then again after the resume) are identical, the data being a function of the
step; readers keep the latest copy.

The pipeline attaches the writer through the kernel's ``zephon_register_observers`` hook (this
package registers it as the observer of the ``manifest`` option: :func:`start_writer`). pyarrow, a
dependency of zephon-observe, is imported only when a manifest is written or read.
"""

from __future__ import annotations

import collections
import datetime
import hashlib
import itertools
import json
import os
import queue
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from zephon_core import ConfigError, ZephonError
from zephon_core.plugin_api import CHUNK_BITS, OFFSET_BITS, splitmix64

if TYPE_CHECKING:
    import argparse

    import pyarrow as pa

    from zephon_core import Chunk, Options, SampleBatch, WorkSource
    from zephon_core.plugin_api import ZephonPluginManager

GROUP_SECONDS = 60.0
"""A part is also written when this long has passed since the last one, so a slow run loses little."""

CHUNK_CACHE = 256
"""Chunks kept to resolve sample ids to pointers (a lane's records come from a few recent chunks)."""

COLUMNS = (
    "step",
    "lane",
    "row",
    "batch_sha256",
    "row_digest",
    "position",
    "dataset",
    "shard",
    "shard_id",
    "index",
    "sample_id",
    "token_start",
    "token_stop",
    "rank",
)
"""One manifest row per record that made a training row (a row without lineage has one null record)."""


def require_pyarrow() -> Any:
    """pyarrow and pyarrow.parquet, or an error naming what to install."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise ConfigError(
            f"the provenance manifest is written as Parquet and needs pyarrow ({exc}), a dependency of "
            "zephon-observe: reinstall it (pip install zephon-observe) or pip install pyarrow"
        ) from None
    return pa, pq


def check_option(value: Any) -> None:
    """The ``manifest`` option's check (run by ``options(manifest=...)``): pyarrow must import.

    So a broken environment fails when the option is set, not once the pipeline is running.
    """
    require_pyarrow()


def start_writer(
    value: str | os.PathLike[str], *, options: Options, source: WorkSource, lanes_per_rank: int
) -> ManifestWriter:
    """The ``manifest`` observer's factory: a writer to ``value`` for this rank, every ``manifest_every_steps`` rounds."""
    return ManifestWriter(value, source, options.dp_rank, options.manifest_every_steps, lanes_per_rank)


def _fs(path: str) -> tuple[Any, str]:
    import fsspec

    fs, root = fsspec.core.url_to_fs(os.fspath(path))
    return fs, root.rstrip("/")


# -- writing ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Delivered:
    """What the training loop's thread takes from one microbatch; the rest is done by the writer thread."""

    step: int
    lane: int
    sha256: str
    counts: list[int]  # lineage entries per row
    sample_ids: np.ndarray  # every row's lineage, concatenated
    digests: np.ndarray  # one per row
    spans: tuple[np.ndarray, np.ndarray] | None  # token [start, stop) per lineage entry, when known


class ManifestWriter:
    """Records what each delivered microbatch held and writes it as part files (see the module docstring).

    The training loop's thread hashes each microbatch as it is handed out (before the training step
    can modify its arrays) and copies its lineage; a writer thread turns a group of them into a part
    file: sample ids to pointers, one Parquet row group, the rename. ``flush(wait=True)`` (what
    ``state_dict()`` uses) returns once everything delivered so far is on disk.

    Args:
        path: the manifest folder (a local path or an fsspec URL).
        source: the pipeline's (calibrated) work source, to turn sample ids into pointers.
        rank: this rank; its parts go to ``PATH/rank-<rank>/``.
        every_steps: rounds per part file.
        lanes_per_rank: microbatches per round on this rank.
    """

    def __init__(
        self, path: str | os.PathLike[str], source: WorkSource, rank: int, every_steps: int, lanes_per_rank: int
    ) -> None:
        self._pa, self._pq = require_pyarrow()
        self.fs, root = _fs(os.fspath(path))
        self.folder = f"{root}/rank-{rank:05d}"
        self.fs.makedirs(self.folder, exist_ok=True)
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
        self.session = f"{stamp}-{uuid.uuid4().hex[:6]}"
        self.rank = rank
        self.source = source
        self.names = [d.name for d in source.datasets]
        self.shard_ids = [np.array([s.id for s in d.shards], dtype=object) for d in source.datasets]
        self.every = max(1, every_steps) * max(1, lanes_per_rank)  # microbatches per part
        protocols = self.fs.protocol if isinstance(self.fs.protocol, tuple) else (self.fs.protocol,)
        self.local = bool({"file", "local"} & set(protocols))
        self._chunks: collections.OrderedDict[int, Chunk] = collections.OrderedDict()
        self._gathered: list[_Delivered] = []
        self._seq = 0
        self._last_write = time.monotonic()
        self._queue: queue.Queue[list[_Delivered] | None] = queue.Queue(maxsize=2)
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._closed = False
        self.files: list[str] = []

    # -- the training loop's side ------------------------------------------------------------------
    def record(self, batch: SampleBatch) -> None:
        """Take one delivered microbatch; hands a group to the writer every ``every_steps`` rounds (or minute)."""
        self._check()
        lineage = batch.lineage
        n = len(lineage)
        if n == 0:
            return
        counts = [len(lin) for lin in lineage]
        total = sum(counts)
        sample_ids = np.fromiter(itertools.chain.from_iterable(lineage), dtype=np.int64, count=total)
        self._gathered.append(
            _Delivered(
                batch.lane_index,
                batch.lane,
                batch.sha256(),
                counts,
                sample_ids,
                _row_digests(batch.data, n),
                _token_spans(batch.data, counts),
            )
        )
        if len(self._gathered) >= self.every or time.monotonic() - self._last_write >= GROUP_SECONDS:
            self.flush()

    def flush(self, wait: bool = False) -> None:
        """Hand what has gathered to the writer thread as one part; ``wait``: until all is on disk."""
        self._check()
        self._last_write = time.monotonic()
        if self._gathered:
            group, self._gathered = self._gathered, []
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="zephon-manifest-writer", daemon=True)
                self._thread.start()
            self._queue.put(group)
        if wait:
            self._queue.join()
            self._check()

    def close(self) -> None:
        """Write what is left and stop the writer thread (the pipeline's ``close()`` calls this)."""
        if self._closed:
            return
        self._closed = True
        try:
            self.flush(wait=True)
        finally:
            if self._thread is not None:
                self._queue.put(None)
                self._thread.join()

    def _check(self) -> None:
        if self._error is not None:
            raise ZephonError(
                f"the manifest writer failed: {type(self._error).__name__}: {self._error}"
            ) from self._error

    # -- the writer thread ------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            group = self._queue.get()
            try:
                if group is None:
                    return
                if self._error is None:
                    self._write(group)
            except BaseException as exc:  # reported to the training loop at its next record() or flush()
                self._error = exc
            finally:
                self._queue.task_done()

    def _write(self, group: list[_Delivered]) -> None:
        table = self._table(group)
        name = f"{self.folder}/part-{self.session}-{self._seq:05d}.parquet"
        self._seq += 1
        # Encoded in memory, then written by Python: pyarrow's threads never call back into a Python
        # file object (which can abort the interpreter at exit), and a part is small.
        sink = self._pa.BufferOutputStream()
        self._pq.write_table(table, sink, compression="zstd")
        data = sink.getvalue().to_pybytes()
        if self.local:  # a temporary name renamed when complete: readers never see half a file
            tmp = name + ".tmp"
            self.fs.pipe_file(tmp, data)
            self.fs.mv(tmp, name)
        else:  # object stores publish an object only once its upload completes
            self.fs.pipe_file(name, data)
        self.files.append(name)

    def _chunk(self, g: int) -> Chunk | None:
        ch = self._chunks.get(g)
        if ch is None:
            ch = self.source.chunk(g)
            if ch is None:
                return None
            self._chunks[g] = ch
            if len(self._chunks) > CHUNK_CACHE:
                self._chunks.popitem(last=False)
        else:
            self._chunks.move_to_end(g)
        return ch

    def _pointers(self, sids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Dataset number, shard and index of every sample id (-1 where unknown), one chunk at a time."""
        ds = np.full(len(sids), -1, dtype=np.int32)
        shard = np.full(len(sids), -1, dtype=np.int32)
        index = np.full(len(sids), -1, dtype=np.int64)
        chunk_no = np.where(sids >= 0, (sids >> OFFSET_BITS) & ((1 << CHUNK_BITS) - 1), -1)
        offset = sids & ((1 << OFFSET_BITS) - 1)
        order = np.argsort(chunk_no, kind="stable")
        chunks, first = np.unique(chunk_no[order], return_index=True)
        bounds = [*first.tolist(), len(order)]
        for k, g in enumerate(chunks.tolist()):
            if g < 0:
                continue  # a row without lineage
            sel = order[bounds[k] : bounds[k + 1]]
            off = offset[sel]
            ch = self._chunk(g)
            if ch is None or int(off.max()) >= len(ch):
                continue  # not a pointer of this source (an operator made its own ids): left unknown
            ds[sel] = ch.dataset[off]
            shard[sel] = ch.shard[off]
            index[sel] = ch.index[off]
        return ds, shard, index

    def _table(self, group: list[_Delivered]) -> pa.Table:
        pa = self._pa
        counts = np.fromiter((c for b in group for c in b.counts), dtype=np.int64)
        rows_per_batch = np.array([len(b.counts) for b in group], dtype=np.int64)
        eff = np.maximum(counts, 1)  # a row without lineage keeps one (null) record
        total = int(eff.sum())
        real = np.repeat(counts > 0, eff)  # which records are lineage entries (not a null placeholder)
        sids = np.full(total, -1, dtype=np.int64)
        sids[real] = np.concatenate([b.sample_ids for b in group])
        start = np.full(total, -1, dtype=np.int32)
        stop = np.full(total, -1, dtype=np.int32)
        if any(b.spans is not None for b in group):
            minus = [np.full(len(b.sample_ids), -1, dtype=np.int32) for b in group]
            start[real] = np.concatenate([b.spans[0] if b.spans else m for b, m in zip(group, minus)])
            stop[real] = np.concatenate([b.spans[1] if b.spans else m for b, m in zip(group, minus)])
        row_start = np.cumsum(eff) - eff
        batch_no = np.repeat(np.arange(len(group), dtype=np.int32), rows_per_batch)
        row_in_batch = np.arange(len(counts), dtype=np.int64) - np.repeat(
            np.cumsum(rows_per_batch) - rows_per_batch, rows_per_batch
        )
        ds, shard, index = self._pointers(sids)
        known = ds >= 0
        shard_id = np.full(total, None, dtype=object)
        for d in np.unique(ds[known]).tolist():
            sel = np.flatnonzero(ds == d)
            ids = self.shard_ids[d]
            s = shard[sel]
            ok = (s >= 0) & (s < len(ids))
            shard_id[sel[ok]] = ids[s[ok]]
        steps = np.array([b.step for b in group], dtype=np.int64)
        lanes = np.array([b.lane for b in group], dtype=np.int32)
        null_span = start < 0
        return pa.table(
            {
                "step": pa.array(np.repeat(steps[batch_no], eff)),
                "lane": pa.array(np.repeat(lanes[batch_no], eff)),
                "row": pa.array(np.repeat(row_in_batch, eff).astype(np.int32)),
                "batch_sha256": pa.DictionaryArray.from_arrays(
                    pa.array(np.repeat(batch_no, eff)), pa.array([b.sha256 for b in group], type=pa.string())
                ),
                "row_digest": pa.array(np.repeat(np.concatenate([b.digests for b in group]), eff)),
                "position": pa.array((np.arange(total) - np.repeat(row_start, eff)).astype(np.int32)),
                "dataset": pa.DictionaryArray.from_arrays(
                    pa.array(ds, mask=~known), pa.array(self.names, type=pa.string())
                ),
                "shard": pa.array(shard, mask=~known),
                "shard_id": pa.array(shard_id, type=pa.string()).dictionary_encode(),
                "index": pa.array(index, mask=~known),
                "sample_id": pa.array(sids, mask=sids < 0),
                "token_start": pa.array(start, mask=null_span),
                "token_stop": pa.array(stop, mask=null_span),
                "rank": pa.array(np.full(total, self.rank, dtype=np.int32)),
            }
        )


_SALTS: dict[int, np.ndarray] = {}


def _row_digests(data: dict[str, np.ndarray], n: int) -> np.ndarray:
    """A 64-bit digest of each row's bytes (every array whose first axis is the rows, keys in order), as int64.

    The batch's SHA-256 says *whether* two runs' microbatches differ; these say *which row* differs
    when the samples are the same but their content is not (a changed source file). Computed for a
    whole microbatch in two passes over its bytes: each 8-byte word times an odd constant of its
    position (so any one changed word changes the sum), summed per row, then mixed (SplitMix64).
    A locator, not a cryptographic hash: the batch's SHA-256 stays the authority.
    """
    mats = []
    for key in sorted(data):
        arr = np.asarray(data[key])
        if arr.ndim == 0 or arr.shape[0] != n or arr.dtype == object:
            continue
        mats.append(np.ascontiguousarray(arr).reshape(n, -1).view(np.uint8))
    if not mats:
        return np.zeros(n, dtype=np.int64)
    width = sum(m.shape[1] for m in mats)
    pad = -width % 8
    if pad:
        mats.append(np.zeros((n, pad), dtype=np.uint8))
    raw = np.concatenate(mats, axis=1) if len(mats) > 1 else mats[0]
    words = np.ascontiguousarray(raw).view(np.uint64)
    salt = _SALTS.get(words.shape[1])
    if salt is None:
        salt = _SALTS[words.shape[1]] = splitmix64(np.arange(words.shape[1], dtype=np.uint64)) | np.uint64(1)
    with np.errstate(over="ignore"):
        summed = (words * salt).sum(axis=1, dtype=np.uint64) + np.uint64(width)
    return splitmix64(summed).view(np.int64)


def _token_spans(data: dict[str, np.ndarray], counts: list[int]) -> tuple[np.ndarray, np.ndarray] | None:
    """Each lineage entry's ``[start, stop)`` in its row from ``document_ids`` (packed rows); None without them.

    Segment *j* of a packed row is ``document_ids == j`` and belongs to the row's *j*-th lineage
    entry; -1 marks padding (see ``zephon_pack.segment_spans``). A row whose segments and lineage
    do not match one to one (records that were not each one sample) gets -1: no spans.
    """
    doc = data.get("document_ids")
    if not isinstance(doc, np.ndarray) or doc.ndim != 2 or doc.shape[0] != len(counts):
        return None
    total = sum(counts)
    start = np.full(total, -1, dtype=np.int32)
    stop = np.full(total, -1, dtype=np.int32)
    at = 0
    for r, k in enumerate(counts):
        row = doc[r]
        valid = row[row >= 0]
        if k and valid.size and int(valid.max()) + 1 == k:
            seg = np.arange(k)
            start[at : at + k] = np.searchsorted(valid, seg, side="left")
            stop[at : at + k] = np.searchsorted(valid, seg, side="right")
        at += k
    return start, stop


# -- reading ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    """One record of a row, as the manifest names it."""

    dataset: str | None
    shard: int | None
    shard_id: str | None
    index: int | None
    token_start: int | None
    token_stop: int | None

    def key(self) -> tuple[Any, ...]:
        return (self.dataset, self.shard, self.index, self.token_start, self.token_stop)

    def __str__(self) -> str:
        if self.dataset is None:
            return "(unknown sample)"
        where = f"{self.dataset}[shard {self.shard} ({self.shard_id}), index {self.index}]"
        if self.token_start is not None:
            where += f" tokens {self.token_start}:{self.token_stop}"
        return where


@dataclass(frozen=True)
class Row:
    """One training row of a microbatch: its digest and the samples it was made from, in order."""

    row: int
    digest: int
    samples: tuple[Sample, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "row": self.row,
            "row_digest": f"{self.digest & (2**64 - 1):016x}",
            "samples": [s.__dict__ for s in self.samples],
        }


class Manifest:
    """A manifest folder (every rank's parts), read with pyarrow.

    Only the step, lane and hash columns are read to compare or list steps; a step's rows are read
    when asked for (Parquet statistics skip the parts that cannot hold it).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._pa, self._pq = require_pyarrow()
        self.path = os.fspath(path)
        self.fs, root = _fs(self.path)
        files = sorted(f for f in self.fs.glob(f"{root}/rank-*/part-*.parquet"))
        if not files:
            raise ZephonError(f"{self.path}: no manifest parts (rank-*/part-*.parquet) found")
        self.files = files
        self._index: dict[tuple[int, int], tuple[str, int]] | None = None

    def _read(self, file: str, columns: Sequence[str] | None = None, step: int | None = None) -> pa.Table:
        # Read whole into memory (parts are small) and decode on this thread: pyarrow's thread pools,
        # left running, can abort the interpreter at exit ("terminate called without an active exception").
        pf = self._pq.ParquetFile(self._pa.BufferReader(self.fs.cat_file(file)))
        groups = list(range(pf.metadata.num_row_groups))
        if step is not None:
            groups = [g for g in groups if _may_hold(pf.metadata.row_group(g), step)]
        table = pf.read_row_groups(groups, columns=list(columns) if columns else None, use_threads=False)
        if step is not None:
            table = table.filter(self._pa.array(table.column("step").to_numpy() == step))
        return table

    def batches(self) -> dict[tuple[int, int], tuple[str, int]]:
        """``(step, lane) -> (batch sha256, rank)``; the latest part wins where a resumed run repeated a step."""
        if self._index is None:
            index: dict[tuple[int, int], tuple[str, int]] = {}
            order = sorted(self.files, key=lambda f: f.rsplit("/", 1)[-1])  # parts sort by session, then number
            for f in order:
                t = self._read(f, ["step", "lane", "batch_sha256", "rank"])
                step = t.column("step").to_numpy()
                lane = t.column("lane").to_numpy()
                first = np.unique(step * (1 << 24) + lane, return_index=True)[1]  # one row per (step, lane)
                digests = t.column("batch_sha256").to_pylist()
                ranks = t.column("rank").to_numpy()
                for i in first.tolist():
                    index[(int(step[i]), int(lane[i]))] = (digests[i], int(ranks[i]))
            self._index = index
        return self._index

    def steps(self) -> list[int]:
        return sorted({s for s, _ in self.batches()})

    def lanes(self) -> list[int]:
        return sorted({lane for _, lane in self.batches()})

    def step_sha256(self, step: int) -> str:
        """One digest for a step: SHA-256 over ``"lane:batch sha256"`` lines, lanes in order."""
        b = self.batches()
        lines = "".join(f"{lane}:{b[(s, lane)][0]}\n" for s, lane in sorted(b) if s == step)
        return hashlib.sha256(lines.encode()).hexdigest()

    def rows(self, step: int) -> dict[int, tuple[str, list[Row]]]:
        """What ``step`` held: per lane, the batch sha256 and its rows (from the part that wins)."""
        wanted = {lane: digest for (s, lane), (digest, _) in self.batches().items() if s == step}
        out: dict[int, tuple[str, list[Row]]] = {}
        order = sorted(self.files, key=lambda f: f.rsplit("/", 1)[-1], reverse=True)  # latest first
        for f in order:
            if len(out) == len(wanted):
                break
            t = self._read(f, step=step)
            if t.num_rows == 0:
                continue
            d = t.to_pydict()
            by_lane: dict[int, dict[int, list[int]]] = {}
            for i, (lane, row) in enumerate(zip(d["lane"], d["row"])):
                if lane in wanted and lane not in out:
                    by_lane.setdefault(lane, {}).setdefault(row, []).append(i)
            for lane, rows in by_lane.items():
                built = []
                for r in sorted(rows):
                    idx = sorted(rows[r], key=lambda i: d["position"][i])
                    samples = tuple(
                        Sample(
                            d["dataset"][i],
                            d["shard"][i],
                            d["shard_id"][i],
                            d["index"][i],
                            d["token_start"][i],
                            d["token_stop"][i],
                        )
                        for i in idx
                    )
                    built.append(Row(r, int(d["row_digest"][idx[0]]), samples))
                out[lane] = (wanted[lane], built)
        return dict(sorted(out.items()))


def _may_hold(group: Any, step: int) -> bool:
    """Whether a row group's statistics allow ``step`` (no statistics: it may)."""
    for i in range(group.num_columns):
        col = group.column(i)
        if col.path_in_schema == "step":
            st = col.statistics
            return st is None or not st.has_min_max or st.min <= step <= st.max
    return True


def _ranges(values: Sequence[int]) -> str:
    """``0-3, 7`` for [0, 1, 2, 3, 7]."""
    out, vals = [], sorted(values)
    i = 0
    while i < len(vals):
        j = i
        while j + 1 < len(vals) and vals[j + 1] == vals[j] + 1:
            j += 1
        out.append(str(vals[i]) if i == j else f"{vals[i]}-{vals[j]}")
        i = j + 1
    return ", ".join(out) or "none"


def show(path: str, step: int | None = None, lane: int | None = None, as_json: bool = False) -> str:
    """What ``zephon manifest show`` prints: a summary, or what global step ``step`` held."""
    m = Manifest(path)
    b = m.batches()
    if step is None:
        ranks = sorted({r for _, r in b.values()})
        steps = m.steps()
        summary = {
            "path": m.path,
            "parts": len(m.files),
            "ranks": ranks,
            "lanes": m.lanes(),
            "steps": [steps[0], steps[-1]] if steps else [],
            "missing_steps": len(range(steps[0], steps[-1] + 1)) - len(steps) if steps else 0,
            "microbatches": len(b),
        }
        if as_json:
            return json.dumps(summary)
        return (
            f"{m.path}: {len(m.files)} part file{'s' * (len(m.files) != 1)} from rank{'s' * (len(ranks) != 1)} "
            f"{_ranges(ranks)}; lanes {_ranges(m.lanes())}; "
            f"global steps {_ranges(steps)} ({len(b)} microbatches)"
        )
    held = m.rows(step)
    if lane is not None:
        held = {k: v for k, v in held.items() if k == lane}
    if not held:
        raise ZephonError(f"{m.path}: global step {step} is not in the manifest (it holds steps {_ranges(m.steps())})")
    if as_json:
        return json.dumps(
            {
                "step": step,
                "step_sha256": m.step_sha256(step),
                "lanes": [
                    {"lane": k, "batch_sha256": digest, "rows": [r.to_json() for r in rows]}
                    for k, (digest, rows) in held.items()
                ],
            }
        )
    lines = [f"global step {step}: lanes {_ranges(list(held))}, step sha256 {m.step_sha256(step)[:16]}"]
    for k, (digest, rows) in held.items():
        lines.append(f"  lane {k}: batch sha256 {digest[:16]}, {len(rows)} rows")
        for r in rows:
            lines.append(f"    row {r.row} ({r.digest & (2**64 - 1):016x}): " + "; ".join(str(s) for s in r.samples))
    return "\n".join(lines)


@dataclass(frozen=True)
class Difference:
    """The result of :func:`diff`: the first differing step (None: none) and the report's lines."""

    step: int | None
    lines: list[str]

    def __str__(self) -> str:
        return "\n".join(self.lines)


def diff(path_a: str, path_b: str, max_rows: int = 20) -> Difference:
    """The first global step where two runs' manifests differ, and which rows and samples differ there.

    Steps are compared by every common lane's batch SHA-256; at the first difference each differing
    lane's rows are compared by their samples (what was read) and their digests (what the samples
    contained). Lanes or steps that only one manifest holds are noted but are not a difference (a
    run that stopped early, or a manifest of fewer ranks).
    """
    a, b = Manifest(path_a), Manifest(path_b)
    ba, bb = a.batches(), b.batches()
    lanes = sorted(set(a.lanes()) & set(b.lanes()))
    notes = []
    if set(a.lanes()) != set(b.lanes()):
        notes.append(
            f"note: A has lanes {_ranges(a.lanes())}, B has lanes {_ranges(b.lanes())}; comparing {_ranges(lanes)}"
        )
    common = sorted(set(a.steps()) & set(b.steps()))
    if set(a.steps()) != set(b.steps()):
        notes.append(f"note: A holds global steps {_ranges(a.steps())}, B holds {_ranges(b.steps())}")
    first = None
    for s in common:
        if any(ba.get((s, lane), ("",))[0] != bb.get((s, lane), ("",))[0] for lane in lanes):
            first = s
            break
    if first is None:
        return Difference(None, [*notes, f"identical: {len(common)} common global steps, same batches in every lane"])
    same_before = [s for s in common if s < first]
    lines = [
        *notes,
        f"first difference at global step {first} ({len(same_before)} common steps before it are identical)",
    ]
    ra, rb = a.rows(first), b.rows(first)
    for lane in lanes:
        da, rows_a = ra.get(lane, ("", []))
        db, rows_b = rb.get(lane, ("", []))
        if da == db:
            continue
        lines.append(f"  lane {lane}: batch sha256 {da[:16] or '(missing)'} (A) != {db[:16] or '(missing)'} (B)")
        shown = 0
        by_b = {r.row: r for r in rows_b}
        differing = 0
        for r in rows_a:
            other = by_b.pop(r.row, None)
            if (
                other is not None
                and other.digest == r.digest
                and [s.key() for s in other.samples] == [s.key() for s in r.samples]
            ):
                continue
            differing += 1
            if shown >= max_rows:
                continue
            shown += 1
            if other is None:
                lines.append(f"    row {r.row}: only in A: " + "; ".join(map(str, r.samples)))
            elif [s.key() for s in other.samples] == [s.key() for s in r.samples]:
                lines.append(
                    f"    row {r.row}: same samples, different content (row digest {r.digest & (2**64 - 1):016x} "
                    f"vs {other.digest & (2**64 - 1):016x}): " + "; ".join(map(str, r.samples))
                )
            else:
                lines.append(f"    row {r.row}: A " + "; ".join(map(str, r.samples)))
                lines.append(f"    {' ' * len(str(r.row))}      B " + "; ".join(map(str, other.samples)))
        for r in by_b.values():
            differing += 1
            if shown < max_rows:
                shown += 1
                lines.append(f"    row {r.row}: only in B: " + "; ".join(map(str, r.samples)))
        if differing > shown:
            lines.append(f"    ... and {differing - shown} more differing rows")
        if differing == 0:
            lines.append("    every row has the same samples and digest: the arrays differ outside the rows")
    return Difference(first, lines)


def command(args: argparse.Namespace, plugins: ZephonPluginManager) -> int:
    """``zephon manifest show`` prints a summary or one step; ``manifest diff`` exits 1 when the runs differ."""
    if args.action == "show":
        print(show(args.path, step=args.step, lane=args.lane, as_json=args.json))
        return 0
    result = diff(args.a, args.b, max_rows=args.max_rows)
    print(result)
    return 0 if result.step is None else 1
