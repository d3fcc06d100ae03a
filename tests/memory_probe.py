"""Run a pipeline of 1 MiB records at default settings and print the peak RSS (MiB): ``python -m tests.memory_probe``.

``--unbounded`` lifts the byte budget; ``--slow-consumer`` sleeps 20 ms per batch, so every queue and the
multiplexer fill up (a training step slower than the pipeline is the usual case).
"""

from __future__ import annotations

import resource
import sys
import time
from typing import Any

import numpy as np

from zephon_core import Dataset, Pipeline, Reader, ShardInfo, StaticMixtureWorkSource


class MebibyteRecords(Reader):
    """16 shards of 256 records of 1 MiB each, made on the fly (4 GiB of data, none of it held)."""

    format = "mebibytes"

    def shards(self) -> list[ShardInfo]:
        return [ShardInfo(f"s{i}", 256) for i in range(16)]

    def read(self, shard: int, indices: np.ndarray) -> list[dict[str, Any]]:
        return [{"x": np.full(1 << 20, (shard * 7 + i) % 251, dtype=np.uint8)} for i in indices.tolist()]


def identity(payload: dict[str, Any]) -> dict[str, Any]:
    return payload


def main(batches: int, options: dict[str, Any], step_s: float = 0.0) -> None:
    ws = StaticMixtureWorkSource([Dataset("big", MebibyteRecords())], seed=0)
    p = Pipeline(ws).map_transform(identity, parallelism=2).batch(8).options(lanes=4, **options)
    with p:
        for i, _ in enumerate(p):
            if i >= batches:
                break
            if step_s:
                time.sleep(step_s)
    print(peak_rss_mib())


def peak_rss_mib() -> int:
    """This process's peak resident set (MiB), from ``VmHWM``: the high-water mark of its own address space.

    Not ``getrusage().ru_maxrss``: Linux carries that over ``exec`` from the process that forked it, so
    a probe started by a test runner that already holds 1.3 GB reported 1.3 GB whatever the pipeline did.
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) // 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


if __name__ == "__main__":
    main(
        int(sys.argv[1]),
        {"max_inflight_bytes": None} if "--unbounded" in sys.argv else {},
        0.02 if "--slow-consumer" in sys.argv else 0.0,
    )
