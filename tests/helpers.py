"""Module-level functions for tests (the processes runner pickles functions by reference)."""

from __future__ import annotations

import os
import time
from typing import Any

from zephon_core.testing.workers import die_on_seven, fail_on_seven, hang_on_seven

__all__ = [
    "FailingShardReader",
    "SlowReader",
    "die_on_seven",
    "fail_on_seven",
    "hang_on_seven",
    "jitter",
    "quick",
    "returns_list",
    "sleepy",
    "sleepy_collate",
    "slow_identity",
    "slow_push",
]


def slow_identity(payload: dict[str, Any]) -> dict[str, Any]:
    time.sleep(0.001)
    return payload


def returns_list(payload: dict[str, Any]) -> Any:
    return [payload]


def jitter(payload: dict[str, Any]) -> dict[str, Any]:
    """Sleep a random few hundred microseconds (timing only; the output is the input)."""
    if os.urandom(1)[0] < 24:
        time.sleep(os.urandom(1)[0] / 100_000)
    return payload


class FailingShardReader:
    """Builds a memory reader whose shard 1 cannot be read (module level: picklable for processes)."""

    @staticmethod
    def make() -> Any:
        from zephon_core.work.readers import MemoryReader

        class _Reader(MemoryReader):
            def read(self, shard: int, indices: Any) -> list[dict[str, Any]]:
                if shard == 1:
                    raise OSError("disk says no")
                return super().read(shard, indices)

        return _Reader([{"i": i} for i in range(40)], 10)


def sleepy(payload: dict[str, Any]) -> dict[str, Any]:
    """2 ms per record: a deliberately slow step."""
    time.sleep(0.002)
    return payload


def quick(payload: dict[str, Any]) -> dict[str, Any]:
    return payload


def sleepy_collate(rows: list[dict[str, Any]]) -> dict[str, Any]:
    import numpy as np

    time.sleep(0.002 * len(rows))
    return {"i": np.array([r["i"] for r in rows])}


def slow_push(state: dict[str, Any], payload: dict[str, Any]) -> list[dict[str, Any]]:
    """A stateful step whose accumulator (serial) is slow."""
    time.sleep(0.002)
    return [payload]


class SlowReader:
    """Builds a memory reader that takes 2 ms per sample (module level: picklable)."""

    @staticmethod
    def make(n: int) -> Any:
        from zephon_core.work.readers import MemoryReader

        class _Reader(MemoryReader):
            def read(self, shard: int, indices: Any) -> list[dict[str, Any]]:
                time.sleep(0.002 * len(indices))
                return super().read(shard, indices)

        return _Reader([{"i": i} for i in range(n)], 500)
