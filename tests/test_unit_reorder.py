"""The reorder window of a stage (``zephon_core.runtime.stage.Stage``), on its own.

Workers may finish in any order; a stage must still forward results in the order it submitted
them, keep sentinels (``FLUSH``, ``LANE_END``) behind the data submitted before them, and hold at
most ``window`` entries, so a slow task back-pressures the stage instead of letting work pile up.
These tests drive one real stage (a ``map_transform`` on the threads runner) with hand-made
messages and force the completion order with events, so nothing depends on timing except the
final "nothing moved" check of the full window, which waits on purpose.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from zephon_core.defaults.operators.mapping import MapTransform
from zephon_core.ops.contract import Records
from zephon_core.runtime.context import Context
from zephon_core.runtime.messages import STOP_MESSAGE, Kind, Message
from zephon_core.runtime.runners import ThreadRunner
from zephon_core.runtime.stage import Stage

WAIT_S = 5.0
"""Upper bound for anything the tests wait for (a hang fails instead of blocking the suite)."""


def data(lane: int, i: int, window: int = 0) -> Message:
    """One record ``{"i": i}`` of ``lane`` as a DATA message (key and lineage from ``i``)."""
    return Message(Kind.DATA, lane, window, Records([{"i": i}], [i], [(i,)]), seq=i)


class Running:
    """A started stage around ``fn`` with its queues; closed by the fixture."""

    def __init__(self, fn: Callable[[dict[str, Any]], dict[str, Any]], window: int, parallelism: int = 2) -> None:
        self.op = MapTransform(fn, parallelism=parallelism)
        self.executor = ThreadRunner().start(self.op.worker(), parallelism, "reorder-test")
        self.ctx = Context()
        self.inbound: queue.Queue[Message] = queue.Queue()
        self.outbound: queue.Queue[Message] = queue.Queue()
        self.stage = Stage(
            self.op,
            self.executor,
            self.inbound,
            self.outbound,
            self.ctx,
            window,
            new_accumulator=self.op.new_accumulator,
            describe_samples=lambda lineage: str(lineage),
        )
        self.stage.start()

    def send(self, *messages: Message) -> None:
        for m in messages:
            self.inbound.put(m)

    def received(self) -> list[Message]:
        """Everything forwarded up to and including ``STOP``."""
        out = []
        while True:
            msg = self.outbound.get(timeout=WAIT_S)
            out.append(msg)
            if msg.kind is Kind.STOP:
                return out

    def close(self) -> None:
        self.ctx.stop.set()
        self.stage.join(WAIT_S)
        self.executor.close()


@pytest.fixture
def stages() -> Iterator[list[Running]]:
    made: list[Running] = []
    yield made
    for s in made:
        s.close()


def summary(messages: list[Message]) -> list[tuple[str, int, Any]]:
    """``(kind, lane, i or window)`` of each message, for readable comparisons."""
    return [(m.kind.value, m.lane, m.body.payloads[0]["i"] if m.kind is Kind.DATA else m.window) for m in messages]


def until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


def test_results_leave_in_submission_order_when_workers_finish_out_of_order(stages: list[Running]) -> None:
    finished: list[int] = []
    later_done = threading.Event()

    def fn(payload: dict[str, Any]) -> dict[str, Any]:
        i = payload["i"]
        if i == 0:  # the first task waits until the second has finished
            assert later_done.wait(WAIT_S)
        finished.append(i)
        if i == 1:
            later_done.set()
        return {"i": i}

    s = Running(fn, window=4)
    stages.append(s)
    s.send(data(0, 0), data(0, 1), data(0, 2), STOP_MESSAGE)
    got = s.received()
    assert finished.index(1) < finished.index(0), "the test must make the workers finish out of order"
    assert summary(got) == [("data", 0, 0), ("data", 0, 1), ("data", 0, 2), ("stop", -1, -1)]
    assert [m.seq for m in got[:3]] == [0, 1, 2]  # each output keeps the seq of the message it answers


def test_sentinels_stay_behind_the_data_submitted_before_them(stages: list[Running]) -> None:
    release = threading.Event()

    def fn(payload: dict[str, Any]) -> dict[str, Any]:
        if payload["i"] == 10:
            assert release.wait(WAIT_S)
        return payload

    s = Running(fn, window=8)
    stages.append(s)
    s.send(
        data(0, 10),  # slow
        Message(Kind.FLUSH, 0, 0),
        data(1, 20, window=3),
        Message(Kind.LANE_END, 1, 3),
        data(0, 11, window=1),
        STOP_MESSAGE,
    )
    until(lambda: s.stage.pending.qsize() >= 5, "the window to fill behind the slow task")
    assert s.outbound.empty(), "nothing may overtake the slow head of the window"
    release.set()
    assert summary(s.received()) == [
        ("data", 0, 10),
        ("flush", 0, 0),
        ("data", 1, 20),
        ("lane_end", 1, 3),
        ("data", 0, 11),
        ("stop", -1, -1),
    ]


def test_a_full_window_stops_the_stage_taking_input_until_its_head_is_done(stages: list[Running]) -> None:
    """``window=2``: the emitter holds the slow head, two entries wait, and the accumulator is stuck
    putting a third; nothing more is read from the inbound queue or submitted to workers."""
    release = threading.Event()
    calls: list[int] = []

    def fn(payload: dict[str, Any]) -> dict[str, Any]:
        calls.append(payload["i"])
        if payload["i"] == 0:
            assert release.wait(WAIT_S)
        return payload

    s = Running(fn, window=2)
    stages.append(s)
    s.send(*(data(0, i) for i in range(8)), STOP_MESSAGE)
    until(lambda: sorted(calls) == [0, 1, 2, 3], "four tasks to start")
    time.sleep(0.2)  # give a leaky window the chance to take more
    assert sorted(calls) == [0, 1, 2, 3], "the head, two waiting entries and the one being put: no more"
    assert s.stage.pending.qsize() == 2
    assert s.inbound.qsize() == 5  # messages 4..7 and STOP are still unread
    assert s.outbound.empty()
    release.set()
    assert summary(s.received()) == [*(("data", 0, i) for i in range(8)), ("stop", -1, -1)]
    assert s.stage.metrics.window_full_s > 0
