"""Flow control in bytes: queues that push back on bytes as well as items, and an estimate of sizes.

A message may hold one chunk of tiny records or of 1 MiB images, so :class:`ByteQueue` also blocks a
producer while it holds more than its share of ``max_inflight_bytes`` (one item always fits), and the
fetch stage reads in groups small enough to stay a small part of the budget. Flow control changes
only *when* work happens, never what the data is.
"""

from __future__ import annotations

import collections
import queue
from typing import Any

import numpy as np

from zephon_core.ops.contract import Records
from zephon_core.runtime.messages import Message
from zephon_core.runtime.types import SampleBatch

SAMPLED = 8
"""Records measured per message; the rest are assumed alike (measuring all would cost per record)."""


def value_nbytes(value: Any) -> int:
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if isinstance(value, (bytes, bytearray, memoryview, str)):
        return len(value)
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], np.ndarray):
        return sum(int(v.nbytes) for v in value if isinstance(v, np.ndarray))
    return 8


def payloads_nbytes(payloads: list[Any]) -> int:
    """Estimated bytes of a list of payload dicts, from a sample of them."""
    n = len(payloads)
    if not n:
        return 0
    sample = payloads[:: max(1, n // SAMPLED)]
    measured = sum(sum(value_nbytes(v) for v in p.values()) if isinstance(p, dict) else 64 for p in sample)
    return measured * n // len(sample)


def message_nbytes(body: Any) -> int:
    """Estimated bytes of a message body: records, microbatches, or anything else (counted as small)."""
    if isinstance(body, Records) and isinstance(body.payloads, list):
        return payloads_nbytes(body.payloads)
    if isinstance(body, SampleBatch) and isinstance(body.data, dict):
        return sum(value_nbytes(v) for v in body.data.values())
    if isinstance(body, tuple) and body and isinstance(body[0], SampleBatch):  # a group of microbatches
        return sum(message_nbytes(b) for b in body)
    return 64


class ByteQueue(queue.Queue[Any]):
    """A bounded queue that is also full while it holds more than ``max_bytes`` (see the module docstring)."""

    def __init__(self, maxsize: int, max_bytes: int | None) -> None:
        super().__init__(maxsize)
        self.max_bytes = max_bytes
        self.bytes = 0
        self.total_bytes = 0
        self.bytes_per_record = 0.0
        self._sizes: collections.deque[int] = collections.deque()

    def _qsize(self) -> int:
        n = len(self.queue)
        if self.max_bytes is not None and n and self.bytes > self.max_bytes:
            return max(n, self.maxsize)  # "full" to put(); still non-empty to get()
        return n

    def _put(self, item: Any) -> None:
        body = item.body if isinstance(item, Message) else None
        size = message_nbytes(body)
        self.total_bytes += size
        records = len(body.payloads) if isinstance(body, Records) else 0
        if records:  # a running mean, read by the fetch stage to size its read groups
            mean = self.bytes_per_record
            self.bytes_per_record = 0.8 * mean + 0.2 * size / records if mean else size / records
        self._sizes.append(size)
        self.bytes += size
        super()._put(item)

    def _get(self) -> Any:
        self.bytes -= self._sizes.popleft()
        return super()._get()
