"""What the Ray runner costs: a map_transform on ray versus threads and processes, same machine.

Three measurements, each for the ``threads``, ``processes`` and ``ray`` runners:

* **tasks/s** of the bare executor (``runner.start(fn, parallelism, label).submit(task)``) on a
  trivial task: the fixed cost of shipping one work item to a worker and its result back;
* **start-up**: time to the first batch of a pipeline (spawning processes, starting actors);
* **samples/s** of a pipeline ``fetch -> map_transform -> batch(64)`` after the first batch, with
  only the map on the runner under test (fetch and batch stay on threads), for a trivial map
  (overhead-bound) and for a CPU-bound pure-Python map (GIL-bound on threads).

Ray is started by the runner itself (lazily, ``num_cpus`` = this machine's CPUs, no dashboard) on
loopback. Run: ``python benchmarks/bench_ray.py`` (``--quick`` for a smaller run, ``--json`` for
machine-readable output). Requires ``pip install -e contrib/zephon-ray``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from typing import Any

# A single-machine benchmark: keep Ray's addresses on 127.0.0.1 (must be set before Ray is imported).
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

from zephon_core import Dataset, Pipeline, StaticMixtureWorkSource
from zephon_core.plugins import default_plugin_manager

CASES = (("threads", 1), ("processes", 1), ("ray", 1), ("ray", 2))
"""(runner, tasks_per_actor): the Ray runner once as configured by default and once with a queued task."""


def identity(payload: dict[str, Any]) -> dict[str, Any]:
    return payload


def checksum_text(payload: dict[str, Any]) -> dict[str, Any]:
    """About half a millisecond of pure Python per 1 KB record: holds the GIL the whole time."""
    h = 0
    text = payload["text"]
    for _ in range(4):
        for ch in text:
            h = (h * 131 + ord(ch)) & 0xFFFFFFFF
    return {"h": h}


def echo(task: Any) -> list[Any]:
    return [task]


def records(n: int) -> list[dict[str, Any]]:
    alphabet = "abcdefghijklmnopqrstuvwxyz     "
    return [{"text": "".join(alphabet[(i * 7 + j * 13) % len(alphabet)] for j in range(1024))} for i in range(n)]


def source(recs: list[dict[str, Any]], chunk_size: int) -> StaticMixtureWorkSource:
    ds = Dataset.from_records("bench", recs, shard_size=4096)
    return StaticMixtureWorkSource([ds], chunk_size=chunk_size, seed=0)


def executor_tasks_per_second(runner: str, parallelism: int, n: int) -> float:
    """Round trips per second of trivial tasks through a started executor (start-up excluded)."""
    ex = default_plugin_manager().registry.get("runner", runner).load()().start(echo, parallelism, f"bench_{runner}")
    try:
        [ex.submit(i) for i in range(2 * parallelism)][-1].result(timeout=300)  # workers are up
        t0 = time.perf_counter()
        futs = [ex.submit(i) for i in range(n)]
        for f in futs:
            f.result(timeout=300)
        return n / (time.perf_counter() - t0)
    finally:
        ex.close()


def pipeline_rate(
    recs: list[dict[str, Any]], fn: Any, runner: str, parallelism: int, chunk_size: int
) -> tuple[float, float]:
    """(seconds to the first batch, samples/s after it) with only the map on ``runner``."""
    p = (
        Pipeline(source(recs, chunk_size))
        .map_transform(fn, parallelism=parallelism, runner=runner)
        .batch(microbatch_size=64)
        .options(lanes=2, runner="threads", queue_depth=8)
    )
    t0 = time.perf_counter()
    with p:
        it = iter(p)
        first = len(next(it))
        t1 = time.perf_counter()
        n = sum(len(b) for b in it)
        t2 = time.perf_counter()
    del first
    return t1 - t0, n / (t2 - t1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer records and tasks")
    ap.add_argument("--parallelism", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3, help="pipeline runs per cell; the median is shown")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    par = args.parallelism
    n_tasks = 500 if args.quick else 2000
    light = records(4000 if args.quick else 20000)
    heavy = light[: 1000 if args.quick else 4000]

    import zephon_ray

    load_before = os.getloadavg()[0]
    results: dict[str, dict[str, float]] = {}
    for runner, depth in CASES:
        label = runner if runner != "ray" else f"ray, tasks_per_actor={depth}"
        zephon_ray.configure(tasks_per_actor=depth)
        row = results[label] = {"executor_tasks_per_s": executor_tasks_per_second(runner, par, n_tasks)}
        for name, recs, fn, chunk in (("identity", light, identity, 64), ("cpu", heavy, checksum_text, 64)):
            runs = [pipeline_rate(recs, fn, runner, par, chunk) for _ in range(args.repeats)]
            row[f"{name}_startup_s"] = statistics.median(r[0] for r in runs)
            row[f"{name}_samples_per_s"] = statistics.median(r[1] for r in runs)

    load_after = os.getloadavg()[0]
    if args.json:
        print(json.dumps({"load_average": [load_before, load_after], "results": results}, indent=2))
        return
    import ray

    print(
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"Ray {ray.__version__}; parallelism {par}; chunks of 64 records; median of {args.repeats} runs; "
        f"1-minute load average {load_before:.1f} before, {load_after:.1f} after (other work skews the figures)"
    )
    print()
    print("| runner | executor tasks/s | start-up to first batch | identity map samples/s | CPU-bound map samples/s |")
    print("|---|---:|---:|---:|---:|")
    for label, r in results.items():
        print(
            f"| {label} | {r['executor_tasks_per_s']:,.0f} | {r['identity_startup_s']:.2f} s | "
            f"{r['identity_samples_per_s']:,.0f} | {r['cpu_samples_per_s']:,.0f} |"
        )


if __name__ == "__main__":
    main()
