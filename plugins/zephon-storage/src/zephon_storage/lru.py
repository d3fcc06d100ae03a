"""A small thread-safe LRU bounded by entries and bytes, for a reader's per-process decode state.

Parsed chunk headers, decoded row groups and inflated zstd frames are worth keeping between reads (a
shuffled fetch returns to the same chunk many times) but must not grow without bound, and the
fetch stage may call one reader from several threads at once.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any


class ByteLRU:
    """Keeps the most recently used values while their total size and count stay within limits.

    Args:
        max_bytes: size budget (an entry larger than the budget is returned but not kept).
        max_entries: count budget.
    """

    def __init__(self, max_bytes: int, max_entries: int = 1 << 30) -> None:
        self.max_bytes = max(0, int(max_bytes))
        self.max_entries = max(1, int(max_entries))
        self._items: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable) -> Any:
        """The value for ``key`` (now most recently used), or None."""
        with self._lock:
            hit = self._items.get(key)
            if hit is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return hit[0]

    def put(self, key: Hashable, value: Any, nbytes: int) -> None:
        """Keep ``value`` (of ``nbytes``), evicting the least recently used entries to fit."""
        if nbytes > self.max_bytes:
            return
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            self._items[key] = (value, nbytes)
            self._bytes += nbytes
            while self._bytes > self.max_bytes or len(self._items) > self.max_entries:
                _, (_, size) = self._items.popitem(last=False)
                self._bytes -= size

    def clear(self) -> None:
        """Forget everything."""
        with self._lock:
            self._items.clear()
            self._bytes = 0

    @property
    def nbytes(self) -> int:
        """Bytes currently kept."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)
