"""What travels between a pipeline's threads: one small frozen message per item, made by the feeder.

* ``DATA`` carries a chunk (into fetch), :class:`~zephon_core.ops.contract.Records` (between stages) or
  a tuple of :class:`~zephon_core.runtime.types.SampleBatch` (out of the terminal stage, in order);
* ``FLUSH`` closes window ``window`` of ``lane``: every operator before ``batch`` emits what it holds and starts afresh;
* ``LANE_END`` says the lane has no more data (after the terminal stage, its body: records left over);
* ``STOP`` follows the last lane's end.

Output made in response to a message inherits its window, so the terminal stage knows each record's
window from the sentinels, never from whether data happened to arrive, and its ``seq`` (the lane's
feeder message it descends from), which only steers *when* the feeder feeds a lane.
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
