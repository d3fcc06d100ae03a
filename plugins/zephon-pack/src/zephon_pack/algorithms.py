"""Packing decisions: which slices of which documents form each row, from lengths only.

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

from zephon_core import Accumulator, ConfigError, Records, Work
from zephon_core.hashing import mix64
from zephon_core.ops.contract import Emitted, Lineage
from zephon_pack.multimodal import ImageSpec, read_sample


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

    def add(self, tokens: Any, lineage: Lineage) -> None:
        self.segments.append(tokens)
        self.lineage.extend(lineage)
        self.fill += len(tokens)


class PackAccumulator(Accumulator):
    """Shared plumbing: read the token field, and turn finished rows into one work item per push."""

    def __init__(
        self, target_length: int, field: str, mask_field: str | None = None, images: ImageSpec | None = None
    ) -> None:
        self.target = target_length
        self.field = field
        self.mask_field = mask_field
        self.images = images

    def tokens(self, payload: dict[str, Any], index: int = 0) -> Any:
        """The document's ids, or a :class:`Masked` pair when the operator packs a mask too, or a
        multimodal :class:`~zephon_pack.multimodal.Segment` with ``images`` (``index``: the record's
        position in its group, so an error names the sample)."""
        try:
            ids = payload[self.field]
        except KeyError:
            raise ConfigError(
                f"pack_sequences: record has no field {self.field!r} (fields: {sorted(payload)}); "
                "tokenize first or pass field="
            ) from None
        if self.images is not None:
            try:
                return read_sample(payload, self.field, self.mask_field, self.images, self.target)
            except ValueError as exc:
                err = ConfigError(f"pack_sequences: {exc}")
                err.index = index  # type: ignore[attr-defined]  # the stage names this record's sample
                raise err from None
        if self.mask_field is None:
            return ids
        try:
            mask = payload[self.mask_field]
        except KeyError:
            raise ConfigError(
                f"pack_sequences: record has no mask field {self.mask_field!r} (fields: {sorted(payload)}); "
                "use tokenize_chat (or add the field) before pack_sequences, or pass mask_field=None"
            ) from None
        if np.ndim(mask) != 1 or len(mask) != len(ids):
            raise ConfigError(
                f"pack_sequences: mask field {self.mask_field!r} has shape {np.shape(mask)} for {len(ids)} tokens; "
                "it must hold one value per token"
            )
        return Masked(ids, mask)

    @staticmethod
    def work(rows: list[Row], dropped: list[Lineage]) -> list[Emitted]:
        if not rows:
            return [Records([], [], [], dropped)] if dropped else []
        return [Work([r.segments for r in rows], [r.key for r in rows], [tuple(r.lineage) for r in rows], dropped)]


class WrapAccumulator(PackAccumulator):
    """Concatenate documents and cut every ``target_length`` tokens (documents may span rows).

    Padding only appears in the one partial row emitted at a flush sentinel or at the end, and,
    for multimodal records, in a row that ends early because an image would straddle its end.
    """

    def __init__(
        self, target_length: int, field: str, mask_field: str | None = None, images: ImageSpec | None = None
    ) -> None:
        super().__init__(target_length, field, mask_field, images)
        self.row: Row | None = None

    def push(self, records: Records) -> list[Emitted]:
        L = self.target
        rows: list[Row] = []
        dropped = list(records.dropped)
        row = self.row
        images = self.images is not None
        for pos, (payload, key, lin) in enumerate(zip(records.payloads, records.keys, records.lineage)):
            arr = self.tokens(payload, pos)
            n = len(arr)
            if not n:
                dropped.append(lin)
                continue
            off = 0
            while off < n:
                if row is None:
                    row = Row(mix64(key, off))
                take = min(n - off, L - row.fill)
                if images and take < n - off:  # never cut inside an image: the row leaves short instead
                    take = arr.cut(off, off + take) - off
                    if not take:  # (row.fill > 0 here: read_sample refuses images longer than a row)
                        rows.append(row)
                        row = None
                        continue
                row.add(arr[off : off + take] if take != n else arr, lin)
                off += take
                if row.fill == L:
                    rows.append(row)
                    row = None
        self.row = row
        return self.work(rows, dropped)

    def flush(self) -> list[Emitted]:
        row, self.row = self.row, None
        return self.work([row] if row is not None else [], [])

    def state(self) -> Any:
        return {"fill": self.row.fill if self.row else 0}


class BinAccumulator(PackAccumulator):
    """Online bin packing with at most ``num_open_bins`` open rows per lane.

    A document goes into the first open bin it fits (``first_fit``) or the one it fills most
    tightly (``best_fit``; ties to the oldest). A bin that becomes exactly full leaves at once.
    When a document fits no bin and all bins are open, the fullest bin (ties: oldest) leaves,
    padded; with ``allow_split`` the document's head first tops that bin up, so it leaves without
    padding. A document longer than a row first yields whole rows of its own.
    """

    def __init__(
        self,
        target_length: int,
        field: str,
        num_open_bins: int,
        best_fit: bool,
        allow_split: bool,
        mask_field: str | None = None,
        images: ImageSpec | None = None,
    ) -> None:
        super().__init__(target_length, field, mask_field, images)
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
        best, best_fill = -1, -1
        for i, b in enumerate(bins):
            if best_fill < b.fill <= room_needed:
                best, best_fill = i, b.fill
        return best

    def _fullest(self) -> int:
        bins = self.bins
        best = 0
        for i in range(1, len(bins)):
            if bins[i].fill > bins[best].fill:
                best = i
        return best

    def push(self, records: Records) -> list[Emitted]:
        L = self.target
        rows: list[Row] = []
        dropped = list(records.dropped)
        bins = self.bins
        images = self.images is not None
        for pos, (payload, key, lin) in enumerate(zip(records.payloads, records.keys, records.lineage)):
            arr = self.tokens(payload, pos)
            n = len(arr)
            if not n:
                dropped.append(lin)
                continue
            off = 0
            while off < n:
                r = n - off
                if r >= L:  # a whole row of this document alone (cut before an image that would straddle)
                    take = arr.cut(off, off + L) - off if images and r > L else L
                    row = Row(mix64(key, off))
                    row.add(arr[off : off + take] if r != take or off else arr, lin)
                    rows.append(row)
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
                    if b.fill == L:
                        rows.append(bins.pop(i))
                    continue
                victim = bins.pop(self._fullest())
                if self.allow_split:
                    take = L - victim.fill
                    if images:
                        take = arr.cut(off, off + take) - off
                    if take:
                        victim.add(arr[off : off + take], lin)
                        off += take
                rows.append(victim)
        return self.work(rows, dropped)

    def flush(self) -> list[Emitted]:
        rows, self.bins = self.bins, []
        return self.work(rows, [])

    def state(self) -> Any:
        return {"fills": [b.fill for b in self.bins]}
