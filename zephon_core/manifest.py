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

pyarrow is imported only when a manifest is written or read (``pip install zephon-core[manifest]``).
"""

from __future__ import annotations

import collections
import datetime
import hashlib
import itertools
import json
import os
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from zephon_core.errors import ConfigError, ZephonError
from zephon_core.work.ids import CHUNK_BITS, OFFSET_BITS

if TYPE_CHECKING:
    import pyarrow as pa

    from zephon_core.runtime.types import SampleBatch
    from zephon_core.work.contract import Chunk, WorkSource

GROUP_STEPS = 256
"""Default rounds per part file (``options(manifest_every_steps=...)``)."""

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
    """pyarrow and pyarrow.parquet, or an error naming the extra to install."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise ConfigError(
            f"the provenance manifest is written as Parquet and needs pyarrow ({exc}); "
            "install it with: pip install 'zephon-core[manifest]'"
        ) from None
    return pa, pq


def _fs(path: str) -> tuple[Any, str]:
    import fsspec

    fs, root = fsspec.core.url_to_fs(os.fspath(path))
    return fs, root.rstrip("/")


# -- writing ------------------------------------------------------------------------------------


class ManifestWriter:
    """Collects what each delivered microbatch held and writes it as part files (see the module docstring).

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
        self._parts: list[dict[str, np.ndarray]] = []
        self._hashes: list[str] = []
        self._batches = 0
        self._seq = 0
        self._last_write = time.monotonic()
        self.files: list[str] = []

    # -- per microbatch --------------------------------------------------------------------------
    def record(self, batch: SampleBatch) -> None:
        """Add one delivered microbatch; writes a part when enough rounds (or time) have gathered."""
        n = len(batch.lineage)
        if n == 0:
            return
        counts = np.fromiter((len(lin) for lin in batch.lineage), dtype=np.int64, count=n)
        eff = np.maximum(counts, 1)  # a row without lineage keeps one (null) record
        total = int(eff.sum())
        sids = np.full(total, -1, dtype=np.int64)
        starts = np.cumsum(eff) - eff
        if int(counts.sum()) == total:
            sids[:] = np.fromiter(itertools.chain.from_iterable(batch.lineage), dtype=np.int64, count=total)
        else:
            for r, lin in enumerate(batch.lineage):
                sids[starts[r] : starts[r] + len(lin)] = lin
        rows = np.repeat(np.arange(n, dtype=np.int32), eff)
        position = (np.arange(total, dtype=np.int64) - np.repeat(starts, eff)).astype(np.int32)
        ds, shard, index = self._pointers(sids)
        span_start, span_stop = _token_spans(batch.data, counts, eff, total)
        self._hashes.append(batch.sha256())
        self._parts.append(
            {
                "step": np.full(total, batch.lane_index, dtype=np.int64),
                "lane": np.full(total, batch.lane, dtype=np.int32),
                "row": rows,
                "batch": np.full(total, len(self._hashes) - 1, dtype=np.int32),
                "row_digest": np.repeat(_row_digests(batch.data, n), eff),
                "position": position,
                "dataset": ds,
                "shard": shard,
                "index": index,
                "sample_id": sids,
                "token_start": span_start,
                "token_stop": span_stop,
            }
        )
        self._batches += 1
        if self._batches >= self.every or time.monotonic() - self._last_write >= GROUP_SECONDS:
            self.flush()

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
        known = sids >= 0
        chunk_no = (sids >> OFFSET_BITS) & ((1 << CHUNK_BITS) - 1)
        offset = sids & ((1 << OFFSET_BITS) - 1)
        for g in np.unique(chunk_no[known]).tolist():
            ch = self._chunk(int(g))
            sel = known & (chunk_no == g)
            off = offset[sel]
            if ch is None or (off.size and int(off.max()) >= len(ch)):
                continue  # not a pointer of this source (an operator made its own ids): left unknown
            ds[sel] = ch.dataset[off]
            shard[sel] = ch.shard[off]
            index[sel] = ch.index[off]
        return ds, shard, index

    # -- writing parts ---------------------------------------------------------------------------
    def flush(self) -> None:
        """Write what has gathered as one part file (one row group); nothing if empty."""
        self._last_write = time.monotonic()
        if not self._parts:
            return
        parts, hashes = self._parts, self._hashes
        self._parts, self._hashes, self._batches = [], [], 0
        cols = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
        table = self._table(cols, hashes)
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

    def _table(self, cols: dict[str, np.ndarray], hashes: list[str]) -> pa.Table:
        pa = self._pa
        ds = cols["dataset"]
        shard = cols["shard"]
        known = ds >= 0
        shard_id = np.full(len(ds), None, dtype=object)
        for d in np.unique(ds[known]).tolist():
            sel = ds == d
            ids = self.shard_ids[d]
            s = shard[sel]
            ok = (s >= 0) & (s < len(ids))
            vals = np.full(len(s), None, dtype=object)
            vals[ok] = ids[s[ok]]
            shard_id[sel] = vals
        names = pa.array(self.names, type=pa.string())
        dataset = pa.DictionaryArray.from_arrays(pa.array(ds, mask=~known), names)
        digest = pa.DictionaryArray.from_arrays(pa.array(cols["batch"]), pa.array(hashes, type=pa.string()))
        null_span = cols["token_start"] < 0
        return pa.table(
            {
                "step": pa.array(cols["step"]),
                "lane": pa.array(cols["lane"]),
                "row": pa.array(cols["row"]),
                "batch_sha256": digest,
                "row_digest": pa.array(cols["row_digest"]),
                "position": pa.array(cols["position"]),
                "dataset": dataset,
                "shard": pa.array(shard, mask=~known),
                "shard_id": pa.array(shard_id, type=pa.string()).dictionary_encode(),
                "index": pa.array(cols["index"], mask=~known),
                "sample_id": pa.array(cols["sample_id"], mask=cols["sample_id"] < 0),
                "token_start": pa.array(cols["token_start"], mask=null_span),
                "token_stop": pa.array(cols["token_stop"], mask=null_span),
                "rank": pa.array(np.full(len(ds), self.rank, dtype=np.int32)),
            }
        )

    def close(self) -> None:
        """Write what is left (the pipeline's ``close()`` and the end of the data call this)."""
        self.flush()


def _row_digests(data: dict[str, np.ndarray], n: int) -> np.ndarray:
    """A 64-bit BLAKE2b digest of each row's arrays (every array whose first axis is the rows), as int64.

    The batch's SHA-256 says *whether* two runs' microbatches differ; these say *which row* differs
    when the samples are the same but their content is not (a changed source file).
    """
    parts = []
    for key in sorted(data):
        arr = np.asarray(data[key])
        if arr.ndim == 0 or arr.shape[0] != n or arr.dtype == object:
            continue
        parts.append((key.encode(), np.ascontiguousarray(arr).reshape(n, -1).view(np.uint8)))
    out = np.empty(n, dtype=np.int64)
    for r in range(n):
        h = hashlib.blake2b(digest_size=8)
        for key, mat in parts:
            h.update(key)
            h.update(mat[r])
        out[r] = int.from_bytes(h.digest(), "little", signed=True)
    return out


def _token_spans(
    data: dict[str, np.ndarray], counts: np.ndarray, eff: np.ndarray, total: int
) -> tuple[np.ndarray, np.ndarray]:
    """Each record's ``[start, stop)`` in its row from ``document_ids`` (packed rows), else -1.

    Segment *j* of a packed row is ``document_ids == j`` and belongs to the row's *j*-th lineage
    entry; -1 marks padding (see ``zephon_pack.segment_spans``). A row whose segments and lineage
    do not match one to one (records that were not each one sample) gets no spans.
    """
    start = np.full(total, -1, dtype=np.int32)
    stop = np.full(total, -1, dtype=np.int32)
    doc = data.get("document_ids")
    if not isinstance(doc, np.ndarray) or doc.ndim != 2 or doc.shape[0] != len(counts):
        return start, stop
    at = 0
    for r in range(len(counts)):
        k = int(counts[r])
        row = doc[r]
        valid = row[row >= 0]
        if k and valid.size and int(valid.max()) + 1 == k:
            seg = np.arange(k)
            start[at : at + k] = np.searchsorted(valid, seg, side="left")
            stop[at : at + k] = np.searchsorted(valid, seg, side="right")
        at += int(eff[r])
    return start, stop


class RecordedIterator:
    """What iterating a pipeline with a manifest returns: the engine's batches, each recorded first."""

    def __init__(self, batches: Iterator[SampleBatch], writer: ManifestWriter) -> None:
        self._batches = batches
        self.writer = writer

    def __iter__(self) -> RecordedIterator:
        return self

    def __next__(self) -> SampleBatch:
        try:
            batch = next(self._batches)
        except StopIteration:
            self.writer.flush()
            raise
        self.writer.record(batch)
        return batch


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
