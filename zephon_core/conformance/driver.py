"""Drive an operator's accumulator and worker directly, the way a stage would, without threads.

The driver lets a check control exactly how records are grouped, where flushes fall and which
lane they belong to, which a running pipeline never exposes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from zephon_core.hashing import digest_payload
from zephon_core.ops.contract import Lineage, Operator, Payload, Records, Work
from zephon_core.runtime.stage import materialize

FLUSH = "flush"


@dataclass
class Output:
    """What an operator produced for one lane: payload digests, keys, lineage, tombstones."""

    digests: list[bytes] = field(default_factory=list)
    keys: list[int] = field(default_factory=list)
    lineage: list[Lineage] = field(default_factory=list)
    dropped: list[Lineage] = field(default_factory=list)
    payloads: list[Payload] = field(default_factory=list)

    def add(self, recs: Records | None) -> None:
        if recs is None:
            return
        self.digests += [digest_payload(p) for p in recs.payloads]
        self.keys += recs.keys
        self.lineage += recs.lineage
        self.dropped += recs.dropped
        self.payloads += recs.payloads


def records_from(payloads: Sequence[Payload], first_chunk: int = 0, chunk_size: int = 16) -> Records:
    """Records with sample-id keys as fetch would give them (``chunk_size`` per chunk)."""
    keys = [((first_chunk + i // chunk_size) << 16) | (i % chunk_size) for i in range(len(payloads))]
    return Records([dict(p) for p in payloads], keys, [(k,) for k in keys])


def split(records: Records, sizes: Sequence[int]) -> list[Records]:
    """Cut records into consecutive groups of the given sizes (the last group takes the rest)."""
    out, i = [], 0
    for s in sizes:
        if i >= len(records):
            break
        out.append(Records(records.payloads[i : i + s], records.keys[i : i + s], records.lineage[i : i + s]))
        i += s
    if i < len(records):
        out.append(Records(records.payloads[i:], records.keys[i:], records.lineage[i:]))
    return out


class Driver:
    """Feeds one operator instance per lane like a stage does (new accumulator after each flush)."""

    def __init__(self, op: Operator) -> None:
        self.op = op
        self.worker = op.worker() if op.traits.has_worker else None
        self.accs: dict[int, Any] = {}
        self.out: dict[int, Output] = {}

    def acc(self, lane: int) -> Any:
        if lane not in self.accs:
            self.accs[lane] = self.op.new_accumulator(lane)
        return self.accs[lane]

    def _emit(self, lane: int, emitted: list[Any]) -> None:
        out = self.out.setdefault(lane, Output())
        for item in emitted:
            if isinstance(item, Work):
                if self.worker is None:
                    raise TypeError(f"operator {self.op.name!r} emitted work but has no worker")
                result = self.worker(item.task)
                out.add(materialize(self.op.traits.fanout, result, item))
            else:
                out.add(item)

    def push(self, lane: int, records: Records) -> None:
        self._emit(lane, self.acc(lane).push(records))

    def flush(self, lane: int) -> None:
        acc = self.accs.get(lane)
        if acc is None:
            return
        self._emit(lane, acc.flush())
        if self.op.traits.resets_on_flush:
            del self.accs[lane]

    def feed(self, lane: int, groups: Sequence[Records | str]) -> Output:
        for g in groups:
            if isinstance(g, str):
                self.flush(lane)
            else:
                self.push(lane, g)
        return self.out.setdefault(lane, Output())


def run_chain(ops: Sequence[Operator], records: Records) -> Records:
    """Pass records through ``ops`` in one group with a final flush: the input an operator under test sees."""
    for op in ops:
        d = Driver(op)
        out = d.feed(0, [records, FLUSH])
        records = Records(out.payloads, out.keys, out.lineage)
    return records
