"""Deliberately broken operators: the conformance suite must reject each, naming the broken rule.

Each one is a small, plausible mistake an operator author could make.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any

from zephon_core import Accumulator, Operator, Records, Traits, Work
from zephon_core.ops.contract import apply_each

_COUNTER = [0]


class _PassWork(Accumulator):
    def push(self, records: Records) -> list[Any]:
        return [Work(records.payloads, records.keys, records.lineage, records.dropped)] if len(records) else []


class _MapBase(Operator):
    traits = Traits(fanout="one")

    def config(self) -> dict[str, Any]:
        return {}

    def new_accumulator(self, lane: int) -> Accumulator:
        return _PassWork()

    def worker(self) -> Any:
        return type(self).work


def _tag(payload: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"n": payload["n"], "text": payload["text"][:20], **extra}


class UnseededRandom(_MapBase):
    """Rule 3: draws from the global ``random`` module."""

    kind = "broken_unseeded_random"

    @staticmethod
    def work(payloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [_tag(p, coin=random.random() < 0.5) for p in payloads]


class DependsOnWorkerIdentity(_MapBase):
    """Rule 1: output depends on which thread ran the worker."""

    kind = "broken_worker_identity"

    @staticmethod
    def work(payloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [_tag(p, worker=threading.get_ident()) for p in payloads]


class DependsOnTiming(_MapBase):
    """Rule 1: output depends on the clock."""

    kind = "broken_timing"

    @staticmethod
    def work(payloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return apply_each(lambda p: _tag(p, slow=time.perf_counter_ns() // 1000 % 2 == 0), payloads)


class MutatesModuleState(_MapBase):
    """Rule 1: the worker counts records in a module-level variable."""

    kind = "broken_module_state"

    @staticmethod
    def work(payloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for p in payloads:
            _COUNTER[0] += 1
            out.append(_tag(p, seen=_COUNTER[0]))
        return out


class _CountingAcc(Accumulator):
    def __init__(self, counts: dict[str, int], lane: int) -> None:
        self.counts = counts
        self.lane = lane

    def push(self, records: Records) -> list[Any]:
        out = Records([], [], [], list(records.dropped))
        for p, k, lin in zip(records.payloads, records.keys, records.lineage):
            self.counts["n"] = self.counts.get("n", 0) + 1
            out.payloads.append(_tag(p, count=self.counts["n"]))
            out.keys.append(k)
            out.lineage.append(lin)
        return [out] if out.payloads else []

    def state(self) -> Any:
        return dict(self.counts)


class KeepsStateAcrossFlush(Operator):
    """Rule 4: per-lane counters live on the operator, so a flush (a fresh accumulator) keeps them."""

    kind = "broken_keeps_state"
    traits = Traits(has_worker=False, stateful=True)

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.per_lane: dict[int, dict[str, int]] = {}

    def config(self) -> dict[str, Any]:
        return {}

    def new_accumulator(self, lane: int) -> Accumulator:
        return _CountingAcc(self.per_lane.setdefault(lane, {}), lane)


class MixesLanes(KeepsStateAcrossFlush):
    """Rule 2: one counter shared by every lane."""

    kind = "broken_mixes_lanes"

    def new_accumulator(self, lane: int) -> Accumulator:
        acc = _CountingAcc(self.per_lane.setdefault(0, {}), lane)
        acc.counts.clear()  # resets at a flush of any lane, but lanes still share it
        return acc


class _GroupSizeAcc(Accumulator):
    def push(self, records: Records) -> list[Any]:
        n = len(records)
        return [Records([_tag(p, group=n) for p in records.payloads], records.keys, records.lineage, records.dropped)]


class DependsOnGroupBoundaries(Operator):
    """Rule 6: writes the size of the pushed group into each record."""

    kind = "broken_group_boundaries"
    traits = Traits(has_worker=False)

    def config(self) -> dict[str, Any]:
        return {}

    def new_accumulator(self, lane: int) -> Accumulator:
        return _GroupSizeAcc()


class _SilentFilter(Accumulator):
    def push(self, records: Records) -> list[Any]:
        keep = [i for i, p in enumerate(records.payloads) if p["n"] % 2 == 0]
        return [
            Records(
                [records.payloads[i] for i in keep], [records.keys[i] for i in keep], [records.lineage[i] for i in keep]
            )
        ]


class LosesLineage(Operator):
    """Rule 5: filters records without recording tombstones."""

    kind = "broken_loses_lineage"
    traits = Traits(has_worker=False)

    def config(self) -> dict[str, Any]:
        return {}

    def new_accumulator(self, lane: int) -> Accumulator:
        return _SilentFilter()


class _SetStateAcc(Accumulator):
    def __init__(self) -> None:
        self.seen: set[int] = set()

    def push(self, records: Records) -> list[Any]:
        self.seen.update(records.keys)
        return [records]

    def state(self) -> Any:
        return {"seen": self.seen}


class StateNotJsonable(Operator):
    """Rule 2: accumulator state is a Python set."""

    kind = "broken_state_not_json"
    traits = Traits(has_worker=False, stateful=True)

    def config(self) -> dict[str, Any]:
        return {}

    def new_accumulator(self, lane: int) -> Accumulator:
        return _SetStateAcc()


class _RecentOnlyAcc(Accumulator):
    """Concatenates words and cuts rows of 16, crediting each row with the records pushed since the
    previous row: the rule ``stateful_transform`` used before exact lineage. A row that starts with
    the tail of the previous document does not name it."""

    def __init__(self) -> None:
        self.words: list[str] = []
        self.pending: list[int] = []
        self.last = 0

    def _rows(self, out: Records, key: int, final: bool) -> None:
        j = 0
        while len(self.words) >= 16 or (final and self.words):
            out.payloads.append({"words": " ".join(self.words[:16])})
            out.keys.append(key | j)
            out.lineage.append(tuple(self.pending))
            self.pending = []
            del self.words[:16]
            j += 1

    def push(self, records: Records) -> list[Any]:
        out = Records([], [], [], list(records.dropped))
        for p, k, lin in zip(records.payloads, records.keys, records.lineage):
            self.words.extend(p["text"].split())
            self.pending.extend(lin)
            self.last = k
            self._rows(out, k << 8, final=False)
        return [out] if (out.payloads or out.dropped) else []

    def flush(self) -> list[Any]:
        out = Records.empty()
        self._rows(out, (self.last << 8) | 0x80, final=True)
        if self.pending:
            out.dropped.append(tuple(self.pending))
        return [out] if (out.payloads or out.dropped) else []

    def state(self) -> Any:
        return {"words": list(self.words), "pending": list(self.pending)}


class CreditsOnlyRecentInputs(Operator):
    """Rule 5: lineage misses the document a row's head was carried over from."""

    kind = "broken_recent_lineage"
    traits = Traits(has_worker=False, stateful=True)

    def config(self) -> dict[str, Any]:
        return {}

    def new_accumulator(self, lane: int) -> Accumulator:
        return _RecentOnlyAcc()


BROKEN = {
    UnseededRandom: 3,
    DependsOnWorkerIdentity: 1,
    DependsOnTiming: 1,
    MutatesModuleState: 1,
    KeepsStateAcrossFlush: 4,
    MixesLanes: 2,
    DependsOnGroupBoundaries: 6,
    LosesLineage: 5,
    StateNotJsonable: 2,
    CreditsOnlyRecentInputs: 5,
}
