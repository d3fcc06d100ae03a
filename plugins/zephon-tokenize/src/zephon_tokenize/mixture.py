"""``ensure_mixture``: reorder each lane so every stretch of output tracks the target mixture.

The work source already interleaves datasets in the target proportion, but only in expectation
per sample: after tokenization and packing, a lane's output can run long on one dataset (a burst of
long documents, a packed row that happens to hold only one source). This operator holds records
per lane in one queue per dataset and releases them in an order that keeps the lane's emitted
tokens close to the target share since the last flush sentinel. It changes order only, never
which records exist, and it drains at every sentinel, so replay rebuilds it exactly.

Two release rules, both deterministic and decided per record:

* ``release="most_behind"`` (the only rule of zephon-tokenize 0.1): the most-behind
  dataset is ``argmin(emitted_tokens[d] / weight[d])`` (ties to the lowest dataset index). When
  that dataset's queue is empty the operator waits for it, unless more than ``max_buffered``
  records or ``max_buffered_tokens`` tokens are held, in which case it releases from the
  most-behind dataset that has something. Records are queued under the dataset that contributes
  most of their tokens, so when every packed row already mixes the datasets in about the target
  proportion, the minority dataset never has a row of its own and the operator holds its whole
  bound (16 rows of 2048 tokens per lane by default) before it releases anything but the first
  row: each lane's first batch, and the first after every flush, waits for that many rows.
* ``release="balanced"`` (the default): of the oldest held record of each dataset, release the one that leaves
  the lane's emitted tokens closest to the target (the smallest largest shortfall
  ``weight[d] * emitted - emitted[d]`` after it; ties to the oldest), and wait only when even that
  would leave some dataset short by more than the record's own size (reordering whole records
  cannot do better than one record), within the same bounds. Rows that already carry the mixture
  leave at once, so the first batch does not wait for the bound; a burst of one dataset is still
  spread out as soon as the other dataset's records arrive.

The token bound keeps the hold (and so the burst a flush releases) to a few packed rows; the record
bound matters for small records such as single documents.

The default, ``release="auto"``, is ``"balanced"`` and is recorded as such in the pipeline's
definition; a checkpoint written before the option existed records no rule, and a pipeline that left
the rule at its default resumes it with ``"most_behind"`` and so with the same batches
(:class:`~zephon_core.plugin_api.AdoptsRecordedConfig`).

What counts as a record's dataset and size:

* its dataset is the one its first source sample was drawn from (``dataset_of(lineage[0])``, read from
  the sample id itself: the operator never needs the work source), its size ``num_tokens`` (or non-padding
  ``input_ids``), or 1 with ``unit="samples"``;
* a packed row (it has ``document_ids`` and one lineage entry per segment, as ``pack_sequences``
  produces) is split exactly: each segment's tokens count towards its own dataset, and the row is
  queued under the dataset that contributes most of its tokens.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Mapping
from typing import Any, Literal

import numpy as np

from zephon_core import Accumulator, ConfigError, Operator, Records, Traits
from zephon_core.plugin_api import Emitted, Lineage, Payload, SourceInfo, dataset_of

Contribution = tuple[tuple[int, float], ...]


class _MixAccumulator(Accumulator):
    def __init__(self, op: EnsureMixture) -> None:
        self._op = op
        n = len(op.weights)
        self._weights = op.weights
        # per dataset, in arrival order: (payload, key, lineage, contribution, arrival number, size)
        self._queues: list[collections.deque[tuple[Payload, int, Lineage, Contribution, int, float]]] = [
            collections.deque() for _ in range(n)
        ]
        self._emitted = [0.0] * n
        self._held = 0
        self._held_tokens = 0.0
        self._arrivals = 0
        total = float(sum(self._weights)) or 1.0
        self._shares = [w / total for w in self._weights]

    def _contribution(self, payload: Payload, lineage: Lineage) -> Contribution:
        comp = self._op.component
        if not lineage:
            return ((0, 1.0),)
        if self._op.resolved_unit == "samples":
            return ((comp(lineage[0]), 1.0),)
        doc = payload.get("document_ids")
        if doc is not None and len(lineage) > 1:
            doc = np.asarray(doc)
            counts = np.bincount(doc[doc >= 0])
            if len(counts) == len(lineage):
                acc: dict[int, float] = {}
                for sid, c in zip(lineage, counts.tolist()):
                    d = comp(sid)
                    acc[d] = acc.get(d, 0.0) + c
                return tuple(sorted(acc.items()))
        return ((comp(lineage[0]), _size(payload)),)

    def _release(self, out: Records, drain: bool) -> None:
        if self._op.release == "balanced":
            self._release_balanced(out, drain)
            return
        queues, emitted, weights, op = self._queues, self._emitted, self._weights, self._op
        n = len(queues)
        while self._held:
            order = sorted(range(n), key=lambda d: (emitted[d] / weights[d], d))
            d = order[0]
            if not queues[d]:
                if not drain and self._held <= op.max_buffered and self._held_tokens <= op.max_buffered_tokens:
                    return
                d = next(x for x in order if queues[x])
            self._emit(d, out)
        self._held_tokens = 0.0  # empty: drop any floating-point residue of the running sum

    def _release_balanced(self, out: Records, drain: bool) -> None:
        queues, emitted, shares, op = self._queues, self._emitted, self._shares, self._op
        n = len(queues)
        while self._held:
            total = sum(emitted)
            best: tuple[float, int, int, float] | None = None
            for d in range(n):
                if not queues[d]:
                    continue
                _, _, _, held_contrib, seq, size = queues[d][0]
                contrib = dict(held_contrib)
                after = total + size
                shortfall = max(shares[x] * after - (emitted[x] + contrib.get(x, 0.0)) for x in range(n))
                cand = (shortfall, seq, d, size)
                if best is None or cand[:2] < best[:2]:
                    best = cand
            assert best is not None  # something is held
            shortfall, _, d, size = best
            if (
                not drain
                and shortfall > size
                and self._held <= op.max_buffered
                and self._held_tokens <= op.max_buffered_tokens
            ):
                return
            self._emit(d, out)
        self._held_tokens = 0.0

    def _emit(self, d: int, out: Records) -> None:
        """Release the oldest record queued under dataset ``d``."""
        payload, key, lin, contrib, _, _ = self._queues[d].popleft()
        self._held -= 1
        for c, t in contrib:
            self._emitted[c] += t
            self._held_tokens -= t
        out.payloads.append(payload)
        out.keys.append(key)
        out.lineage.append(lin)

    def push(self, records: Records) -> list[Emitted]:
        queues = self._queues
        out = Records([], [], [], list(records.dropped))
        for payload, key, lin in zip(records.payloads, records.keys, records.lineage):
            contrib = self._contribution(payload, lin)
            primary = max(contrib, key=lambda ct: (ct[1], -ct[0]))[0]
            size = float(sum(t for _, t in contrib))
            queues[primary].append((payload, key, lin, contrib, self._arrivals, size))
            self._arrivals += 1
            self._held += 1
            self._held_tokens += size
            self._release(out, drain=False)  # per record, so grouping cannot change the order
        return [out] if (out.payloads or out.dropped) else []

    def flush(self) -> list[Emitted]:
        out = Records.empty()
        self._release(out, drain=True)
        return [out] if out.payloads else []

    def state(self) -> Any:
        return {"emitted": list(self._emitted), "held": [len(q) for q in self._queues]}


def _size(payload: Payload) -> float:
    n = payload.get("num_tokens")
    if n is not None:
        return float(n)
    ids = payload.get("input_ids")
    if ids is not None:
        return float(len(ids) - int(payload.get("num_padding", 0)))
    return 1.0


class EnsureMixture(Operator):
    """Reorder each lane's records so every window of output matches the mixture (see module docstring).

    Args:
        unit: ``"tokens"``, ``"samples"``, or ``"auto"``: tokens when the work source mixes by
            tokens (``weight_by="tokens"``), samples otherwise.
        max_buffered: records held per lane before the operator stops waiting for a lagging dataset.
        max_buffered_tokens: the same bound in tokens (in samples with ``unit="samples"``); the
            default is 16 rows of 2048 tokens.
        release: ``"balanced"`` releases rows that already carry the mixture at once;
            ``"most_behind"`` (the rule of zephon-tokenize 0.1) waits for the most-behind dataset
            up to the bounds, which holds 16 packed rows per lane before a first batch (module
            docstring). ``"auto"`` (default): ``"balanced"``, or ``"most_behind"`` when resuming a
            checkpoint written before this option existed.
        name: operator name in errors and fingerprints.
    """

    kind = "ensure_mixture"
    traits = Traits(has_worker=False, stateful=True)

    def __init__(
        self,
        unit: Literal["auto", "tokens", "samples"] = "auto",
        max_buffered: int = 64,
        max_buffered_tokens: int = 32768,
        *,
        release: Literal["auto", "most_behind", "balanced"] = "auto",
        parallelism: int = 1,
        runner: str | None = None,
        name: str | None = None,
    ) -> None:
        super().__init__(parallelism=parallelism, runner=runner, name=name)
        if unit not in ("auto", "tokens", "samples"):
            raise ConfigError(f"ensure_mixture: unit must be 'auto', 'tokens' or 'samples', got {unit!r}")
        for label, value in (("max_buffered", max_buffered), ("max_buffered_tokens", max_buffered_tokens)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"ensure_mixture: {label} must be an int >= 1, got {value!r}")
        if release not in ("auto", "most_behind", "balanced"):
            raise ConfigError(f"ensure_mixture: release must be 'auto', 'balanced' or 'most_behind', got {release!r}")
        self.release_setting = release
        self.release: Literal["most_behind", "balanced"] = "balanced" if release == "auto" else release
        self.unit = unit
        self.max_buffered = max_buffered
        self.max_buffered_tokens = max_buffered_tokens
        self._ready = False
        self.weights: list[float] = []
        self.resolved_unit = unit

    def config(self) -> dict[str, Any]:
        config: dict[str, Any] = {
            "unit": self.unit,
            "max_buffered": self.max_buffered,
            "max_buffered_tokens": self.max_buffered_tokens,
        }
        if self.release != "most_behind":
            # Written only for the newer rule: the definitions (and checkpoints) of pipelines
            # written before the option existed carry no key, which means "most_behind".
            config["release"] = self.release
        return config

    def adopt_recorded_config(self, config: Mapping[str, Any]) -> Callable[[], None] | None:
        """Resume a checkpoint of zephon-tokenize 0.1 (no ``release`` recorded) with its rule,
        when this operator left the rule at its default."""
        if self.release_setting != "auto" or "release" in config or self.release == "most_behind":
            return None
        self.release = "most_behind"

        def undo() -> None:
            self.release = "balanced"

        return undo

    def setup(self, source: SourceInfo) -> None:
        """Take the target shares (and, with ``unit="auto"``, their unit) from the work source's summary."""
        self.weights = list(source.shares)
        if self.unit == "auto":
            self.resolved_unit = source.unit
        self._ready = True

    @staticmethod
    def component(sample_id: int) -> int:
        """The dataset index a source sample id was drawn from."""
        return dataset_of(sample_id)

    def new_accumulator(self, lane: int) -> Accumulator:
        if not self._ready:
            raise ConfigError("ensure_mixture was not set up with the work source's summary (setup(SourceInfo))")
        return _MixAccumulator(self)
