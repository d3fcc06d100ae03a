"""Work sources and worker functions for testing the Ray runner (and a Ray deployment).

Functions that double, fail, crash their worker, report their pid or the CPUs Ray assigned: enough
to check that work reaches the actors, that a failure or a dead actor becomes an error naming the
operator, and that options reach Ray. The package's tests register this module with cloudpickle
*by value*, so Ray workers receive the functions' code with the pickle, the way a training
script's own functions reach a cluster (whether or not the workers could import this package).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

from zephon_core import Dataset, StaticMixtureWorkSource
from zephon_core.testing.workers import die_on_seven, fail_on_seven, hang_on_seven

__all__ = [
    "add_one",
    "assigned_cpus",
    "die_on_odd",
    "die_on_seven",
    "die_task",
    "double",
    "drop_fives",
    "fail_on_seven",
    "hang_on_seven",
    "numbers",
    "pid_task",
    "slow_add_one",
]


def numbers(n: int = 400, chunk_size: int = 16) -> StaticMixtureWorkSource:
    """Records ``{"i": 0..n-1}`` in order, one dataset (sample i is ``nums[..., index i]``)."""
    ds = Dataset.from_records("nums", [{"i": i} for i in range(n)], shard_size=50)
    return StaticMixtureWorkSource([ds], chunk_size=chunk_size, seed=0, shuffle=False)


def add_one(payload: dict[str, Any]) -> dict[str, Any]:
    """``{"i": i}`` becomes ``{"i": i, "j": i + 1}`` (a map that keeps every record)."""
    return {**payload, "j": payload["i"] + 1}


def drop_fives(payload: dict[str, Any]) -> dict[str, Any] | None:
    """Drops every record whose ``i`` is a multiple of 5 (a map that leaves tombstones)."""
    return None if payload["i"] % 5 == 0 else payload


def double(task: list[int]) -> list[int]:
    """Each number twice (a task is a list of numbers)."""
    return [2 * x for x in task]


def pid_task(task: Any) -> list[int]:
    """Answers with the pid of the process that ran it (and dawdles, so tasks overlap)."""
    time.sleep(0.2)
    return [os.getpid()]


def die_task(task: Any) -> Any:
    """Kill the worker process running it."""
    os.kill(os.getpid(), signal.SIGKILL)


def die_on_odd(task: list[int]) -> list[int]:
    """Kill the worker process on a task holding an odd number; echo the others (a poison record)."""
    if any(x % 2 for x in task):
        os.kill(os.getpid(), signal.SIGKILL)
    return task


def slow_add_one(payload: dict[str, Any]) -> dict[str, Any]:
    """:func:`add_one` after 4 ms of sleep, so a multi-node run lasts long enough to lose a node in it."""
    time.sleep(0.004)
    return {**payload, "j": payload["i"] + 1}


class PidRecorder:
    """A map function that writes its process id into ``folder`` and slows down a little."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def __call__(self, payload: dict[str, Any]) -> dict[str, Any]:
        Path(self.folder, str(os.getpid())).touch()
        time.sleep(0.002)
        return payload


def assigned_cpus(payload: dict[str, Any]) -> dict[str, Any]:
    """The CPUs Ray assigned to the actor running this, to check ``actor_options`` reached Ray."""
    import ray

    return {"i": payload["i"], "cpus": ray.get_runtime_context().get_assigned_resources().get("CPU", 0.0)}  # type: ignore[no-untyped-call]
