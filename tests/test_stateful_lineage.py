"""Exact lineage of ``stateful_transform``: ``Emit`` names sources, bare items get a sound superset."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from zephon_core import ConfigError, Emit, Records, take_sources
from zephon_core.defaults.operators.stateful import StatefulTransform
from zephon_core.demo import ROW, concat_flush, concat_init, concat_push


def _records(payloads: list[dict[str, Any]], first: int = 0) -> Records:
    keys = list(range(first, first + len(payloads)))
    return Records(payloads, keys, [(100 + k,) for k in keys])


def _run(op: StatefulTransform, payloads: list[dict[str, Any]], group: int = 3) -> Records:
    """Push in groups of ``group`` then flush; all outputs and tombstones of one lane."""
    acc = op.new_accumulator(0)
    out = Records.empty()
    emitted = []
    for i in range(0, len(payloads), group):
        emitted += acc.push(_records(payloads[i : i + group], first=i))
    emitted += acc.flush()
    for item in emitted:
        out.payloads += item.task if hasattr(item, "task") else item.payloads
        out.keys += item.keys
        out.lineage += item.lineage
        out.dropped += item.dropped
    return out


def test_demo_rows_name_every_document_they_hold():
    lengths = [50, 200, 10, 1, 127, 300, 5, 60, 126, 1]  # rows spanning 2..4 documents; one spans 3 rows
    docs = [{"tokens": np.full(n, d + 1, dtype=np.int32)} for d, n in enumerate(lengths)]
    op = StatefulTransform("concat", init_state=concat_init, push=concat_push, flush=concat_flush)
    out = _run(op, docs)
    # reference: every token (and each document's separator) tagged with its document, cut every ROW
    owners = np.concatenate([np.full(n + 1, d) for d, n in enumerate(lengths)])
    assert len(out.payloads) == -(-len(owners) // ROW)
    for r, (row, lin) in enumerate(zip(out.payloads, out.lineage)):
        want = tuple(100 + d for d in dict.fromkeys(owners[r * ROW : (r + 1) * ROW].tolist()))
        assert lin == want, f"row {r}"
        assert len(row) == ROW
    spans_305 = [r for r, lin in enumerate(out.lineage) if 105 in lin]
    assert len(spans_305) == 3, "the 300-token document is named by each of the three rows it spans"
    assert not out.dropped


def test_lineage_does_not_depend_on_grouping():
    docs = [{"tokens": np.arange(n, dtype=np.int32)} for n in (90, 40, 300, 7, 64, 200)]
    op = StatefulTransform("concat", init_state=concat_init, push=concat_push, flush=concat_flush)
    runs = [_run(op, docs, group=g) for g in (1, 2, 6)]
    for r in runs[1:]:
        assert r.keys == runs[0].keys and r.lineage == runs[0].lineage


def _bare_init() -> dict[str, Any]:
    return {"buf": []}


def _bare_push(state: dict[str, Any], payload: dict[str, Any]) -> list[list[int]]:
    state["buf"].extend(payload["v"])
    rows = []
    while len(state["buf"]) >= 4:
        rows.append(state["buf"][:4])
        del state["buf"][:4]
    return rows


def _bare_flush(state: dict[str, Any]) -> list[list[int]]:
    rows = [state["buf"]] if state["buf"] else []
    state["buf"] = []
    return rows


def test_bare_items_credit_everything_since_the_state_was_fresh():
    """Without Emit the kernel cannot see inside the buffer: it credits every record since the
    buffer was last empty (a superset), and forgets them once the state equals init_state()."""
    op = StatefulTransform("bare", init_state=_bare_init, push=_bare_push, flush=_bare_flush)
    payloads = [{"v": [1, 1, 1]}, {"v": [2, 2, 2]}, {"v": [3, 3]}, {"v": [4, 4, 4, 4]}, {"v": [5]}]
    out = _run(op, payloads, group=1)
    assert out.payloads == [[1, 1, 1, 2], [2, 2, 3, 3], [4, 4, 4, 4], [5]]
    # row 2 holds the tail of record 1: the old rule (records since the last emission) named only 102
    assert out.lineage == [(100, 101), (100, 101, 102), (103,), (104,)]
    assert not out.dropped


def test_records_no_output_names_become_tombstones():
    def push(state: dict[str, Any], payload: dict[str, Any]) -> list[Any]:
        state["n"] += 1
        return [Emit(payload["v"], [-1])] if payload["v"] else []

    op = StatefulTransform("filter", init_state=lambda: {"n": 0}, push=push)
    out = _run(op, [{"v": 1}, {"v": 0}, {"v": 2}, {"v": 0}])
    assert out.lineage == [(100,), (102,)]
    assert sorted(out.dropped) == [(101,), (103,)]


def test_emit_sources_are_checked():
    def push(state: dict[str, Any], payload: dict[str, Any]) -> list[Any]:
        state["n"] += 1
        return [Emit(payload, [payload["src"]])]

    op = StatefulTransform("bad", init_state=lambda: {"n": 0}, push=push)
    acc = op.new_accumulator(0)
    assert acc.push(_records([{"src": -1}, {"src": 0}]))[0].lineage == [(100,), (100,)]
    with pytest.raises(ConfigError, match="not a record this lane still holds"):
        acc.push(_records([{"src": 7}], first=2))
    # a state back to init_state() holds nothing, so earlier records can no longer be named
    fresh = StatefulTransform("fresh", init_state=dict, push=lambda s, p: [Emit(p, [p["src"]])]).new_accumulator(0)
    fresh.push(_records([{"src": -1}]))
    with pytest.raises(ConfigError, match="earlier ones were released"):
        fresh.push(_records([{"src": 0}], first=1))
    with pytest.raises(ConfigError, match="must be ints"):
        op.new_accumulator(0).push(_records([{"src": "0"}]))


def test_take_sources_consumes_from_the_front_and_skips_empty_spans():
    spans = [[0, 3], [1, 0], [2, 5]]
    assert take_sources(spans, 2) == [0]
    assert spans == [[0, 1], [1, 0], [2, 5]]
    assert take_sources(spans, 4) == [0, 2]
    assert spans == [[2, 2]]
    assert take_sources(spans, 10) == [2] and spans == []
