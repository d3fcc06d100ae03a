"""The feeder: walks the rank's lanes, computes each lane's next chunk, and injects flush sentinels.

Chunk ``g`` of lane ``l`` is ``LaneLayout.chunk(l, local_index)``: one counter per lane, a ``FLUSH``
after every ``K`` chunks of a lane and, at its end, one closing the last, partial window and a
``LANE_END``. It feeds the lane with the fewest microbatches expected at the multiplexer (timing
only): waiting there or due from its messages in flight, at its yield per message so far; counting
only what waits would overfeed a lane whose data is still in the pipeline. A message is through once
it or a later one reached the multiplexer (stages forward in order), even if it yielded nothing as an
operator holds its records (``ensure_mixture``, a packer's open row). Holds come in runs, so a held
lane's first :data:`HELD_LOOKAHEAD` messages in flight count as yielding nothing: one trip covers a run."""

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
"""A held lane's messages in flight counted as yielding nothing: most runs of holds, too few to crowd out others."""


class Demand(Protocol):
    """What paces the feeder: the multiplexer (:class:`~zephon_core.runtime.multiplexer.Multiplexer`)."""

    def last_arrived(self, lane: int) -> int:
        """``seq`` of the latest message of ``lane`` to reach the end of the pipeline (-1: none)."""

    def outlook(self, lane: int, in_flight: int, passed: int) -> float:
        """Microbatches of ``lane`` expected: waiting, plus what ``in_flight`` messages should yield."""


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
        self.source, self.layout, self.k = source, layout, flush_every
        self.ctx, self.out, self.demand, self.group_size = ctx, out, demand, group_size
        owned = layout.owned
        self.next_local = {lane: starts[lane].first_chunk(flush_every) for lane in owned}
        self.emitted = dict.fromkeys(owned, 0)
        self.chunks = dict.fromkeys(owned, 0)
        self.sent = dict.fromkeys(owned, 0)  # messages put for the lane: the next one's seq
        self.puts = 0  # messages put for all lanes: the next one's put number
        # per lane, (seq, put number) of its messages not yet known to be through the pipeline
        self.unsettled: dict[int, collections.deque[tuple[int, int]]] = {lane: collections.deque() for lane in owned}
        self.through = -1  # put number of the latest message known to be through the pipeline

    def settle(self) -> None:
        """Learn which messages are through the pipeline: those that arrived, and all put before them."""
        for lane, log in self.unsettled.items():
            last = self.demand.last_arrived(lane)
            while log and log[0][0] <= last:
                self.through = max(self.through, log.popleft()[1])

    def in_flight(self, lane: int) -> int:
        """Messages of ``lane`` not yet through the pipeline, as of the last :meth:`settle`."""
        log = self.unsettled[lane]
        while log and log[0][1] <= self.through:
            log.popleft()
        return len(log)

    def held(self, lane: int) -> bool:
        """Whether the latest message of ``lane`` through the pipeline yielded nothing (an operator holds
        its records). Call after :meth:`in_flight`, which leaves only those in flight in the lane's log."""
        log = self.unsettled[lane]
        latest = (log[0][0] if log else self.sent[lane]) - 1
        return latest > self.demand.last_arrived(lane)

    def outlook(self, lane: int) -> float:
        """Microbatches of ``lane`` expected at the multiplexer, as of the last :meth:`settle`."""
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
        """The lanes whose next chunk may be computed now (or is, being sent in parts): all, unless the
        source paces the feeder (:class:`~zephon_core.work.contract.Paced`, as steered sources do)."""
        if not isinstance(self.source, Paced):
            return active
        may, chunk = self.source.may_compute, self.layout.chunk
        return [lane for lane in active if lane in parts or may(chunk(lane, self.next_local[lane]))]

    def run(self) -> None:
        """Thread body: feed every lane to its end, then ``STOP``; a failure stops the pipeline."""
        try:
            self._feed()
        except Stopped:
            pass
        except BaseException as exc:
            self.ctx.fail(exc)

    def _feed(self) -> None:
        k = self.k
        active = list(self.layout.owned)
        parts: dict[int, tuple[Chunk, int]] = {}  # lane -> (chunk being sent in parts, next offset)
        while active:
            feedable = self._feedable(active, parts)
            if not feedable:  # every lane is at its lead (trainer-steered sources): wait for the training loop
                if self.ctx.stop.is_set():
                    raise Stopped
                time.sleep(LEAD_POLL_S)
                continue
            lane = self._pick_lane(feedable, self.emitted)
            c = self.next_local[lane]
            window = c // k if k else 0
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
            self.emitted[lane] += 1
            if stop < len(chunk):
                parts[lane] = (chunk, stop)
                continue
            del parts[lane]
            self.next_local[lane] = c + 1
            self.chunks[lane] += 1
            if k and (c + 1) % k == 0:
                self._put(Kind.FLUSH, lane, window)
        self.ctx.put(self.out, STOP_MESSAGE)
