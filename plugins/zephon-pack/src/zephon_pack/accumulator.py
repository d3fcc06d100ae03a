"""The per-lane accumulator of ``pack_sequences``: read each document, then hand it to a packer.

Before a document reaches a packer (:mod:`zephon_pack.algorithms`) the accumulator reads its
tokens, applies ``length_fn``, drops it with a tombstone when it is empty (or, with
``drop_oversized``, longer than a row), and then

* with ``order`` other than ``"arrival"``, holds it in an order window of ``order_window``
  documents; when the window is full (counted in documents, so independent of how records were
  grouped on the way in) or at a flush, the window is placed in that order: ``"length"`` longest
  first (ties in arrival order), ``"random"`` by a hash of (``seed``, lane, record key), never a
  generator. Documents never move across a flush sentinel;
* with ``group_by``, routes it to its group's own packer: only documents of one group share a row.

Emission order, which is part of the output: rows leave in the order the packers close them while
documents are placed; at a flush the order window is placed first, then each group's open rows
leave, groups in the order of their first document since the previous flush, each group's rows
oldest first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from zephon_core import Accumulator, ConfigError, Records, Work
from zephon_core.plugin_api import Emitted, Lineage, callable_name, datasets_of, mix64, stable_hash64
from zephon_pack.algorithms import BestFitWrapPacker, BinPacker, Masked, Packer, Row, WrapPacker
from zephon_pack.multimodal import ImageSpec, read_sample

DATASET = "dataset"
"""``group_by`` value that groups by the dataset each sample was drawn from (read off its lineage)."""


@dataclass(frozen=True, slots=True)
class PackPlan:
    """Everything a lane's accumulator needs; built by the operator from its validated options."""

    target: int
    field: str
    algorithm: str
    num_open_bins: int
    allow_split: bool
    mask_field: str | None = None
    images: ImageSpec | None = None
    max_candidate_age: int | None = None
    max_sequences_per_bin: int | None = None
    drop_oversized: bool = False
    length_fn: Callable[[dict[str, Any]], int] | None = None
    group_by: str | None = None
    order: str = "arrival"
    order_window: int = 256
    seed: int = 0

    def packer(self) -> Packer:
        images, cap = self.images is not None, self.max_sequences_per_bin
        if self.algorithm == "wrap":
            return WrapPacker(self.target, images, cap)
        if self.algorithm == "best_fit_wrap":
            return BestFitWrapPacker(self.target, images, cap, self.num_open_bins, self.max_candidate_age)
        return BinPacker(self.target, images, cap, self.num_open_bins, self.algorithm == "best_fit", self.allow_split)


def _error(message: str, index: int) -> ConfigError:
    err = ConfigError(f"pack_sequences: {message}")
    err.index = index  # the stage names this record's sample
    return err


class PackAccumulator(Accumulator):
    """One lane: documents in, finished rows (as one :class:`Work` item per push) out."""

    def __init__(self, plan: PackPlan, lane: int) -> None:
        self.plan = plan
        self.target = plan.target
        self.packers: dict[Any, Packer] = {}
        self.single = plan.packer() if plan.group_by is None else None
        self.buffer: list[tuple[Any, int, Lineage, Any]] | None = None if plan.order == "arrival" else []
        self.salt = stable_hash64("pack_sequences.order", plan.seed, lane)

    # -- reading a document ------------------------------------------------------------------------
    def tokens(self, payload: dict[str, Any], index: int = 0) -> Any:
        """The document's ids, or a :class:`Masked` pair when the operator packs a mask too, or a
        multimodal :class:`~zephon_pack.multimodal.Segment` with ``images`` (``index``: the record's
        position in its group, so an error names the sample)."""
        plan = self.plan
        try:
            ids = payload[plan.field]
        except KeyError:
            raise ConfigError(
                f"pack_sequences: record has no field {plan.field!r} (fields: {sorted(payload)}); "
                "tokenize first or pass field="
            ) from None
        if plan.images is not None:
            try:
                return read_sample(payload, plan.field, plan.mask_field, plan.images, plan.target)
            except ValueError as exc:
                raise _error(str(exc), index) from None
        if plan.mask_field is None:
            return ids
        try:
            mask = payload[plan.mask_field]
        except KeyError:
            raise ConfigError(
                f"pack_sequences: record has no mask field {plan.mask_field!r} (fields: {sorted(payload)}); "
                "use tokenize_chat (or add the field) before pack_sequences, or pass mask_field=None"
            ) from None
        if np.ndim(mask) != 1 or len(mask) != len(ids):
            raise ConfigError(
                f"pack_sequences: mask field {plan.mask_field!r} has shape {np.shape(mask)} for {len(ids)} tokens; "
                "it must hold one value per token"
            )
        return Masked(ids, mask)

    def _length(self, arr: Any, payload: dict[str, Any], index: int) -> Any:
        fn = self.plan.length_fn
        assert fn is not None
        n = len(arr)
        m = fn(payload)
        if isinstance(m, np.integer):
            m = int(m)
        if not isinstance(m, int) or isinstance(m, bool) or not 0 <= m <= n:
            raise _error(
                f"length_fn {callable_name(fn)} returned {m!r} for a document of {n} tokens; "
                f"it must return an int from 0 to the length of {self.plan.field!r}",
                index,
            )
        if m == n:
            return arr
        if self.plan.images is not None:
            m = arr.cut(0, m)  # never keep part of an image
        return arr[:m]

    def _group(self, payload: dict[str, Any], lin: Lineage, index: int) -> Any:
        by = self.plan.group_by
        if by == DATASET:
            ds = set(datasets_of(lin))
            if len(ds) != 1:
                raise _error(f"group_by='dataset': record's lineage names datasets {sorted(ds)}, not one", index)
            return ds.pop()
        try:
            g = payload[by]  # type: ignore[index]
        except KeyError:
            raise _error(f"group_by={by!r}: record has no field {by!r} (fields: {sorted(payload)})", index) from None
        if (isinstance(g, np.ndarray) and g.ndim == 0) or isinstance(g, np.generic):
            g = g.item()
        if not isinstance(g, (str, int, bytes)):
            raise _error(f"group_by={by!r}: the field holds {type(g).__name__}; it must be a str, int or bytes", index)
        return g

    # -- placing -------------------------------------------------------------------------------------
    def _place(self, arr: Any, key: int, lin: Lineage, group: Any, out: list[Row]) -> None:
        packer = self.single
        if packer is None:
            packer = self.packers.get(group)
            if packer is None:
                packer = self.packers[group] = self.plan.packer()
        packer.place(arr, key, lin, out)

    def _drain(self, out: list[Row]) -> None:
        buf = self.buffer
        if not buf:
            return
        if self.plan.order == "length":
            buf.sort(key=lambda d: -len(d[0]))  # stable: ties keep arrival order
        else:
            salt = self.salt
            buf.sort(key=lambda d: mix64(salt, d[1]))  # record keys are unique within a lane
        for arr, key, lin, group in buf:
            self._place(arr, key, lin, group, out)
        buf.clear()

    def push(self, records: Records) -> list[Emitted]:
        plan = self.plan
        L = self.target
        rows: list[Row] = []
        dropped = list(records.dropped)
        single, buf = self.single, self.buffer
        grouped = plan.group_by is not None
        for pos, (payload, key, lin) in enumerate(zip(records.payloads, records.keys, records.lineage)):
            arr = self.tokens(payload, pos)
            if plan.length_fn is not None:
                arr = self._length(arr, payload, pos)
            n = len(arr)
            if not n or (n > L and plan.drop_oversized):
                dropped.append(lin)  # a tombstone: the sample is accounted for
                continue
            if single is not None and buf is None:
                single.place(arr, key, lin, rows)
                continue
            group = self._group(payload, lin, pos) if grouped else None
            if buf is None:
                self._place(arr, key, lin, group, rows)
                continue
            buf.append((arr, key, lin, group))
            if len(buf) >= plan.order_window:
                self._drain(rows)
        return self.work(rows, dropped)

    def flush(self) -> list[Emitted]:
        rows: list[Row] = []
        self._drain(rows)
        if self.single is not None:
            self.single.flush(rows)
        for packer in self.packers.values():
            packer.flush(rows)
        self.packers = {}
        return self.work(rows, [])

    def state(self) -> Any:
        state = (
            self.single.state()
            if self.single is not None
            else {"groups": {repr(g): p.state() for g, p in self.packers.items()}}
        )
        if self.buffer is not None:
            state = {**state, "order_window": len(self.buffer)}
        return state

    @staticmethod
    def work(rows: list[Row], dropped: list[Lineage]) -> list[Emitted]:
        if not rows:
            return [Records([], [], [], dropped)] if dropped else []
        return [Work([r.segments for r in rows], [r.key for r in rows], [tuple(r.lineage) for r in rows], dropped)]
