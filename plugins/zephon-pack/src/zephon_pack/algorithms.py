"""Packing decisions: which slices of which documents form each row, from lengths only.

One :class:`Packer` per algorithm (``wrap``, ``first_fit``/``best_fit``, ``best_fit_wrap``) holds
the open rows of one lane, or of one group of a lane with ``group_by``; what happens to a document
before it reaches a packer (length, drops, placement order, groups) is
:mod:`zephon_pack.accumulator`.

The accumulators never copy tokens. A row under construction is a list of slices (numpy views)
of the incoming documents plus their lineage; a finished row goes to the workers, which assemble
the arrays. Per document the accumulator does a handful of Python operations, because this code
runs serially for every record of a lane.

Row identity: a row's key is ``mix64(key of its first document, offset of its first token in
that document)``. Every token belongs to exactly one row, so no two rows share a first token and
keys are unique within a lane whatever the algorithm.

Row lineage is exact: each segment adds its record's lineage, in segment order, so a row names
every document it holds tokens of, and a document split across rows (``wrap`` always, the bin
algorithms with ``allow_split`` or for documents longer than a row) is named by each of those
rows. When every record came from one sample (as after ``tokenize``) that is one entry per
segment: segment ``j`` is ``document_ids == j`` in the payload, ``lineage[j]`` is its document, and
:func:`segment_spans` reads each document's token span off the row. Spans are deliberately not
put into the lineage itself: lineage is the kernel-wide ``tuple[int, ...]`` of sample ids that
checkpoints, tombstones, ``Pipeline.explain`` and ``ensure_mixture`` read, and the span within the
row is already in the payload. What neither records is where a slice sat *inside* its document
(a ``wrap`` row may hold a document's tail); training does not need it (positions restart at every
segment), and a payload field for it would change every collated batch.

Multimodal records (``image_token_id``; :mod:`zephon_pack.multimodal`) are
:class:`~zephon_pack.multimodal.Segment` objects that slice like the arrays and also answer
``cut(start, end)``: the last point at or before ``end`` that is not inside an image's placeholder
run. Wherever an algorithm would cut a document, it cuts there instead, so an image is never split:
``wrap`` lets the row leave short (padded) when not even the image fits, the bin algorithms give a
long document rows that stop before such an image, and ``allow_split`` tops a row up only to it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from zephon_core.plugin_api import Lineage, mix64


def segment_spans(document_ids: Any, lineage: Lineage) -> list[tuple[int, int, int]]:
    """``(sample id, start, stop)`` of each document's tokens in one packed row, in row order.

    ``document_ids`` is the row's field of that name (``-1`` marks padding), ``lineage`` the row's
    lineage. Exact when every record given to ``pack_sequences`` had a one-sample lineage (what
    ``tokenize`` produces; pieces of a split document repeat its id); otherwise the lineage has
    more entries than the row has segments and this raises ``ValueError``.
    """
    doc = np.asarray(document_ids)
    valid = doc[doc >= 0]  # padding only ever follows the segments
    k = int(valid.max()) + 1 if valid.size else 0
    if len(lineage) != k:
        raise ValueError(
            f"segment_spans: the row has {k} segments but its lineage {len(lineage)} entries "
            "(the packed records did not each come from one sample)"
        )
    seg = np.arange(k)
    starts = np.searchsorted(valid, seg, side="left").tolist()
    stops = np.searchsorted(valid, seg, side="right").tolist()
    return [(int(sid), a, b) for sid, a, b in zip(lineage, starts, stops)]


class Masked:
    """A document's token ids with its token-aligned mask: sliced together, so cuts stay aligned.

    Behaves like the bare id array where the accumulators need it (``len`` and slicing), which keeps
    the packing algorithms identical with and without a mask.
    """

    __slots__ = ("ids", "mask")

    def __init__(self, ids: Any, mask: Any) -> None:
        self.ids = ids
        self.mask = mask

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, s: slice) -> Masked:
        return Masked(self.ids[s], self.mask[s])

    def __getstate__(self) -> tuple[Any, Any]:
        return self.ids, self.mask

    def __setstate__(self, state: tuple[Any, Any]) -> None:
        self.ids, self.mask = state


@dataclass(slots=True)
class Row:
    """A row being filled: token slices in order, the lineage of each slice, and its identity."""

    key: int
    segments: list[Any] = field(default_factory=list)
    lineage: list[int] = field(default_factory=list)
    fill: int = 0
    born: int = 0
    """``best_fit_wrap``: the packer's document count when the row opened (for ``max_candidate_age``)."""

    def add(self, tokens: Any, lineage: Lineage) -> None:
        self.segments.append(tokens)
        self.lineage.extend(lineage)
        self.fill += len(tokens)


class Packer:
    """One algorithm's open rows for one lane (or one group of a lane, with ``group_by``).

    :meth:`place` takes one non-empty document (its token slices answer ``len`` and slicing, and
    ``cut`` when ``images``) and appends every row it closes to ``out``, in the order they close.
    ``cap`` is ``max_sequences_per_bin``: a row that reaches it leaves at once, padded.
    """

    def __init__(self, target: int, images: bool, cap: int | None) -> None:
        self.target = target
        self.images = images
        self.cap = cap

    def place(self, arr: Any, key: int, lin: Lineage, out: list[Row]) -> None:
        raise NotImplementedError

    def flush(self, out: list[Row]) -> None:
        raise NotImplementedError

    def state(self) -> Any:
        raise NotImplementedError


class WrapPacker(Packer):
    """Concatenate documents and cut every ``target_length`` tokens (documents may span rows).

    Padding only appears in the one partial row emitted at a flush sentinel or at the end, for
    multimodal records in a row that ends early because an image would straddle its end, and in a
    row that reaches ``max_sequences_per_bin`` documents.
    """

    def __init__(self, target: int, images: bool, cap: int | None) -> None:
        super().__init__(target, images, cap)
        self.row: Row | None = None

    def place(self, arr: Any, key: int, lin: Lineage, out: list[Row]) -> None:
        L = self.target
        n = len(arr)
        row = self.row
        off = 0
        while off < n:
            if row is None:
                row = Row(mix64(key, off))
            take = min(n - off, L - row.fill)
            if self.images and take < n - off:  # never cut inside an image: the row leaves short instead
                take = arr.cut(off, off + take) - off
                if not take:  # (row.fill > 0 here: read_sample refuses images longer than a row)
                    out.append(row)
                    row = None
                    continue
            row.add(arr[off : off + take] if take != n else arr, lin)
            off += take
            if row.fill == L or len(row.segments) == self.cap:
                out.append(row)
                row = None
        self.row = row

    def flush(self, out: list[Row]) -> None:
        if self.row is not None:
            out.append(self.row)
        self.row = None

    def state(self) -> Any:
        return {"fill": self.row.fill if self.row else 0}


class BinPacker(Packer):
    """Online bin packing with at most ``num_open_bins`` open rows.

    A document goes into the first open bin it fits (``first_fit``) or the one it fills most
    tightly (``best_fit``; ties to the oldest). A bin that becomes exactly full leaves at once.
    When a document fits no bin and all bins are open, the fullest bin (ties: oldest) leaves,
    padded; with ``allow_split`` the document's head first tops that bin up, so it leaves without
    padding. A document longer than a row first yields whole rows of its own.
    """

    def __init__(
        self, target: int, images: bool, cap: int | None, num_open_bins: int, best_fit: bool, allow_split: bool
    ) -> None:
        super().__init__(target, images, cap)
        self.k = num_open_bins
        self.best_fit = best_fit
        self.allow_split = allow_split
        self.bins: list[Row] = []

    def _fit(self, n: int) -> int:
        room_needed = self.target - n
        bins = self.bins
        if not self.best_fit:
            for i, b in enumerate(bins):
                if b.fill <= room_needed:
                    return i
            return -1
        return best_fit(bins, room_needed)

    def _fullest(self) -> int:
        bins = self.bins
        best = 0
        for i in range(1, len(bins)):
            if bins[i].fill > bins[best].fill:
                best = i
        return best

    def place(self, arr: Any, key: int, lin: Lineage, out: list[Row]) -> None:
        L = self.target
        bins = self.bins
        n = len(arr)
        off = 0
        while off < n:
            r = n - off
            if r >= L:  # a whole row of this document alone (cut before an image that would straddle)
                take = arr.cut(off, off + L) - off if self.images and r > L else L
                row = Row(mix64(key, off))
                row.add(arr[off : off + take] if r != take or off else arr, lin)
                out.append(row)
                off += take
                continue
            i = self._fit(r)
            if i < 0 and len(bins) < self.k:
                bins.append(Row(mix64(key, off)))
                i = len(bins) - 1
            if i >= 0:
                b = bins[i]
                b.add(arr[off:] if off else arr, lin)
                off = n
                if b.fill == L or len(b.segments) == self.cap:
                    out.append(bins.pop(i))
                continue
            victim = bins.pop(self._fullest())
            if self.allow_split:
                take = L - victim.fill
                if self.images:
                    take = arr.cut(off, off + take) - off
                if take:
                    victim.add(arr[off : off + take], lin)
                    off += take
            out.append(victim)

    def flush(self, out: list[Row]) -> None:
        out.extend(self.bins)
        self.bins = []

    def state(self) -> Any:
        return {"fills": [b.fill for b in self.bins]}


def best_fit(rows: list[Row], room_needed: int) -> int:
    """Index of the fullest row with ``fill <= room_needed`` (ties: the oldest), or -1."""
    best, best_fill = -1, -1
    for i, b in enumerate(rows):
        if best_fill < b.fill <= room_needed:
            best, best_fill = i, b.fill
    return best


class BestFitWrapPacker(Packer):
    """Best fit over a bounded pool of open rows whose leftovers wrap.

    A document goes whole into the open row it fills most tightly (ties: the oldest). If it fits
    none, it opens a new row while fewer than ``candidate_pool_size`` are open; otherwise it tops up
    the emptiest row (ties: the oldest), which leaves full, and its remainder continues in a new
    row (a remainder longer than a row fills whole rows first). A row that becomes full, or reaches
    ``max_sequences_per_bin`` documents, leaves at once. With ``max_candidate_age``, a row that has
    stayed open while more than that many documents arrived (counting the one that opened it as 0)
    leaves padded, oldest first, after the document that made it too old. So at most
    ``candidate_pool_size`` rows are held, each for a bounded number of documents, and padding
    appears only at those age-outs, at flushes, at a cap, and (multimodal) where a wrap would cut
    an image: the row then leaves short and the image starts the next row.
    """

    def __init__(
        self, target: int, images: bool, cap: int | None, candidate_pool_size: int, max_age: int | None
    ) -> None:
        super().__init__(target, images, cap)
        self.k = candidate_pool_size
        self.max_age = max_age
        self.rows: list[Row] = []  # in the order they opened
        self.docs = 0

    def place(self, arr: Any, key: int, lin: Lineage, out: list[Row]) -> None:
        L = self.target
        rows = self.rows
        n = len(arr)
        self.docs += 1
        i = best_fit(rows, L - n) if n < L else -1
        if i >= 0:
            b = rows[i]
            b.add(arr, lin)
            if b.fill == L or len(b.segments) == self.cap:
                out.append(rows.pop(i))
        else:
            off = 0
            while off < n:
                r = n - off
                if len(rows) < self.k:  # a new row (always room for the remainder of a wrap)
                    i = len(rows)
                    rows.append(Row(mix64(key, off), born=self.docs))
                else:
                    i = emptiest(rows)
                row = rows[i]
                take = min(r, L - row.fill)
                if self.images and take < r:
                    take = arr.cut(off, off + take) - off
                if take:
                    row.add(arr[off : off + take] if take != n else arr, lin)
                    off += take
                if off < n or row.fill == L or len(row.segments) == self.cap:
                    out.append(rows.pop(i))
        if self.max_age is not None:
            oldest = self.docs - self.max_age
            while rows and rows[0].born < oldest:
                out.append(rows.pop(0))

    def flush(self, out: list[Row]) -> None:
        out.extend(self.rows)
        self.rows = []

    def state(self) -> Any:
        return {"fills": [b.fill for b in self.rows], "ages": [self.docs - b.born for b in self.rows]}


def emptiest(rows: list[Row]) -> int:
    """Index of the emptiest row (ties: the oldest)."""
    best = 0
    for i in range(1, len(rows)):
        if rows[i].fill < rows[best].fill:
            best = i
    return best
