"""A thread-safe LRU keyed by anything, bounded by the total byte size of its values."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class ByteLRU(Generic[V]):
    """Keeps the most recently used values whose sizes add up to at most ``max_bytes``.

    One value larger than the whole budget is still returned to its caller, just not kept.
    """

    def __init__(self, max_bytes: int, size_of: Callable[[V], int]) -> None:
        self.max_bytes = int(max_bytes)
        self._size_of = size_of
        self._items: OrderedDict[Hashable, tuple[V, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable) -> V | None:
        with self._lock:
            hit = self._items.get(key)
            if hit is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return hit[0]

    def put(self, key: Hashable, value: V) -> None:
        size = self._size_of(value)
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            if size > self.max_bytes:
                return
            self._items[key] = (value, size)
            self._bytes += size
            while self._bytes > self.max_bytes:
                _, (_, s) = self._items.popitem(last=False)
                self._bytes -= s

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes = 0

    @property
    def nbytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)
