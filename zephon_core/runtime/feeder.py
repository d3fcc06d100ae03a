"""The feeder: walks the rank's lanes, computes each lane's next chunk, and injects flush sentinels.

A lane's chunks are computed directly from the work source (chunk ``g`` of lane ``l`` is
``LaneLayout.chunk(l, local_index)``), so the feeder holds one counter per lane. After every ``K``
chunks of a lane it sends a ``FLUSH`` closing that window; at the lane's end it closes the last,
partial window and sends ``LANE_END``. Which lane it feeds next follows demand: the lane with the
fewest microbatches expected at the multiplexer, counting those waiting there and those still in
flight (its messages not yet through the pipeline, times the microbatches per message the lane has
yielded so far). Counting only what waits would overfeed a lane whose data is still in the pipeline,
and the multiplexer would then hold a pile of that lane's microbatches while it waits for another
lane: with large records that pile, not the queues, is where memory went.

A message is through the pipeline once it, or any message put after it, has reached the
multiplexer: every stage forwards in the order it received (a reorder window restores it), so output
made in response to a later message comes after whatever the earlier one made. A message can be
through without having yielded anything: a packer's open row or ``ensure_mixture`` holds its
records until more of the lane comes. Counting such a message as still in flight (it never arrives)
made a lane that is waited for look fed while it starved, and the feeder then fed every other lane
for seconds. The feeder therefore numbers every message it puts and keeps, per lane, the numbers of
those not yet known to be through.

A lane whose latest message through yielded nothing has its records held by an operator
(``ensure_mixture`` waiting for the other dataset's tokens, a packer's open row), and such holds
come in runs: on the text demo a lane yields nothing for up to four chunks, then ten microbatches
at once. Counting its messages in flight at the lane's average rate made it look fed: it got one
chunk at a time, and each one it needed cost a trip through the whole pipeline (about a global
batch of other lanes' work queued ahead of it), so one global batch waited for three or four
batches' worth of work. While a lane is held, its first :data:`HELD_LOOKAHEAD` messages in flight
therefore count as yielding nothing: a held lane with nothing waiting keeps getting chunks until
more than that many are in flight, so one trip covers a run of holds.

The choice changes timing only: each lane's messages are the same whatever the interleaving.
"""

from __future__ import annotations

import collections
import queue
import time
from collections.abc import Callable, Mapping
from typing import Protocol

from zephon_core.errors import ConfigError
from zephon_core.runtime.context import Context, Stopped
from zephon_core.runtime.messages import STOP_MESSAGE, Kind, Message
from zephon_core.runtime.replay import LaneStart
from zephon_core.work.contract import Chunk, Paced, WorkSource
from zephon_core.work.ids import CHUNK_BITS
from zephon_core.work.lanes import LaneLayout

LEAD_POLL_S = 0.002
"""How often a feeder held back by a trainer-steered source's lead looks again."""

HELD_LOOKAHEAD = 3
"""Messages in flight that count as yielding nothing while a lane's records are held (see the module
docstring): enough to cover most runs of holds in one trip through the pipeline, few enough that a
held lane cannot crowd out the others (beyond them, its messages count at its average rate again)."""


class Demand(Protocol):
    """What paces the feeder: the multiplexer (:class:`~zephon_core.runtime.multiplexer.Multiplexer`)."""

    def last_arrived(self, lane: int) -> int:
        """``seq`` of the latest message of ``lane`` to reach the end of the pipeline (-1: none)."""
        ...

    def outlook(self, lane: int, in_flight: int, passed: int) -> float:
        """Microbatches of ``lane`` expected: waiting, plus what ``in_flight`` messages should yield."""
        ...


class Feeder:
    """Produces the head queue's messages for the lanes one rank owns (run on its own thread)."""

    def __init__(
        self,
        source: WorkSource,
        layout: LaneLayout,
        flush_every: int,
        starts: Mapping[int, LaneStart],
        ctx: Context,
        out: queue.Queue[Message],
        demand: Demand,
        group_size: Callable[[int], int] = lambda n: n,
    ) -> None:
        self.source = source
        self.layout = layout
        self.k = flush_every
        self.ctx = ctx
        self.out = out
        self.demand = demand
        self.group_size = group_size
        self.next_local = {lane: starts[lane].first_chunk(flush_every) for lane in layout.owned}
        self.emitted = {lane: 0 for lane in layout.owned}
        self.chunks = {lane: 0 for lane in layout.owned}
        self.sent = {lane: 0 for lane in layout.owned}  # messages put for the lane: the next one's seq
        self.puts = 0  # messages put for all lanes: the next one's put number
        # per lane, (seq, put number) of its messages not yet known to be through the pipeline
        self.unsettled: dict[int, collections.deque[tuple[int, int]]] = {
            lane: collections.deque() for lane in layout.owned
        }
        self.through = -1  # put number of the latest message known to be through the pipeline

    def window_of(self, local_index: int) -> int:
        """The window a lane-local chunk belongs to."""
        return local_index // self.k if self.k else 0

    def settle(self) -> None:
        """Learn which messages are through the pipeline: those that arrived, and all put before them."""
        demand, through = self.demand, self.through
        for lane, log in self.unsettled.items():
            last = demand.last_arrived(lane)
            while log and log[0][0] <= last:
                through = max(through, log.popleft()[1])
        self.through = through

    def in_flight(self, lane: int) -> int:
        """Messages of ``lane`` not yet through the pipeline, as of the last :meth:`settle`."""
        log = self.unsettled[lane]
        while log and log[0][1] <= self.through:
            log.popleft()
        return len(log)

    def held(self, lane: int) -> bool:
        """Whether the latest message of ``lane`` known to be through yielded nothing (an operator holds
        its records), as of the last :meth:`settle`.

        Call after :meth:`in_flight`: the lane's messages left in its log are the ones still in
        flight, so the one before the first of them is the latest through. It yielded nothing when
        nothing of it, or of any later message of the lane, reached the multiplexer.
        """
        log = self.unsettled[lane]
        latest = (log[0][0] if log else self.sent[lane]) - 1
        return latest > self.demand.last_arrived(lane)

    def outlook(self, lane: int) -> float:
        """Microbatches of ``lane`` expected at the multiplexer, as of the last :meth:`settle`.

        A held lane's first :data:`HELD_LOOKAHEAD` messages in flight count as yielding nothing.
        """
        in_flight = self.in_flight(lane)
        counted = max(0, in_flight - HELD_LOOKAHEAD) if self.held(lane) else in_flight
        return self.demand.outlook(lane, counted, self.sent[lane] - in_flight)

    def _pick_lane(self, active: list[int], emitted: dict[int, int]) -> int:
        self.settle()
        return min(active, key=lambda lane: (self.outlook(lane), emitted[lane], lane))

    def _put(self, kind: Kind, lane: int, window: int, body: object = None) -> None:
        seq = self.sent[lane]
        self.unsettled[lane].append((seq, self.puts))  # before the put: it may arrive before put returns
        self.puts += 1
        self.sent[lane] += 1
        self.ctx.put(self.out, Message(kind, lane, window, body, seq))

    def _feedable(self, active: list[int], parts: Mapping[int, object]) -> list[int]:
        """The lanes whose next chunk may be computed now: all, unless the source paces the feeder
        (:class:`~zephon_core.work.contract.Paced`, see :mod:`zephon_core.defaults.sources.steering`); a chunk being
        sent in parts is computed."""
        source = self.source
        if not isinstance(source, Paced):
            return active
        return [
            lane
            for lane in active
            if lane in parts or source.may_compute(self.layout.chunk(lane, self.next_local[lane]))
        ]

    def run(self) -> None:
        """Thread body: feed every lane to its end, then ``STOP``; a failure stops the pipeline."""
        try:
            self._feed()
        except Stopped:
            pass
        except BaseException as exc:
            self.ctx.fail(exc)

    def _feed(self) -> None:
        ctx, k, out = self.ctx, self.k, self.out
        active = list(self.layout.owned)
        emitted = self.emitted
        parts: dict[int, tuple[Chunk, int]] = {}  # lane -> (chunk being sent in parts, next offset)
        while active:
            feedable = self._feedable(active, parts)
            if not feedable:  # every lane is at its lead (trainer-steered sources): wait for the training loop
                if ctx.stop.is_set():
                    raise Stopped
                time.sleep(LEAD_POLL_S)
                continue
            lane = self._pick_lane(feedable, emitted)
            c = self.next_local[lane]
            window = self.window_of(c)
            if lane not in parts:
                g = self.layout.chunk(lane, c)
                if g >> CHUNK_BITS:
                    raise ConfigError(f"chunk number {g} exceeds 2**{CHUNK_BITS}: use a larger chunk_size")
                chunk = self.source.chunk(g)
                if chunk is None:
                    if not k or c % k:
                        self._put(Kind.FLUSH, lane, window)
                    self._put(Kind.LANE_END, lane, window)
                    active.remove(lane)
                    continue
                parts[lane] = (chunk, 0)
            chunk, start = parts[lane]
            stop = min(len(chunk), start + max(1, self.group_size(len(chunk))))
            self._put(Kind.DATA, lane, window, chunk if (start, stop) == (0, len(chunk)) else chunk.part(start, stop))
            emitted[lane] += 1
            if stop < len(chunk):
                parts[lane] = (chunk, stop)
                continue
            del parts[lane]
            self.next_local[lane] = c + 1
            self.chunks[lane] += 1
            if k and (c + 1) % k == 0:
                self._put(Kind.FLUSH, lane, window)
        ctx.put(out, STOP_MESSAGE)
