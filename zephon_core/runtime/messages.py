"""What travels between a pipeline's threads: one small frozen message per item.

The feeder creates messages and every stage forwards them, so their meaning is defined here once:

* ``DATA`` carries a chunk (into fetch), :class:`~zephon_core.ops.contract.Records` (between stages)
  or a tuple of :class:`~zephon_core.runtime.types.SampleBatch` (out of the terminal stage: the
  microbatches cut from one message, in order);
* ``FLUSH`` closes window ``window`` of ``lane``: every operator before ``batch`` emits what it holds
  and starts the next window fresh;
* ``LANE_END`` says the lane has no more data (its body, after the terminal stage, is the number of
  records left over in a partial microbatch);
* ``STOP`` follows the last lane's end.

Output made in response to a message inherits its window (counted from the lane's first chunk), so
the terminal stage knows each record's window from the sentinels themselves, never from whether data
happened to arrive. It also inherits ``seq``, the number of the lane's feeder message it descends
from, which only steers *when* the feeder feeds a lane (:mod:`zephon_core.runtime.feeder`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any


class Kind(enum.Enum):
    DATA = "data"
    FLUSH = "flush"
    LANE_END = "lane_end"
    STOP = "stop"


@dataclass(frozen=True, slots=True)
class Message:
    """One item on a queue between threads (see the module docstring)."""

    kind: Kind
    lane: int
    window: int
    body: Any = None
    seq: int = 0

    def with_body(self, body: Any) -> Message:
        return Message(self.kind, self.lane, self.window, body, self.seq)


STOP_MESSAGE = Message(Kind.STOP, -1, -1)
