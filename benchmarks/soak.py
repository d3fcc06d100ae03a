"""Soak: run a processes pipeline over repeating data for a long time and watch the process's resources.

Prints, every ``--every`` seconds: batches so far, resident memory (RSS), open file descriptors,
threads, and child processes, for the training process itself. After warm-up every column but the
first must stay flat; ``--check`` exits non-zero when RSS grew by more than 20% (and ``--rss-slack``,
64 MiB by default) or any of the counts grew after the first report.

Run: ``python benchmarks/soak.py --seconds 600``. The test suite runs a 24-second version with the
RSS slack scaled to it: 24 MiB over the 20 s after the first report (1.2 MiB/s) catches any leak that
64 MiB over the 50 s after the first report of a minute-long run (1.3 MiB/s) would.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np

from zephon_core import Dataset, Pipeline, StaticMixtureWorkSource


def make_record(i: int) -> dict[str, object]:
    rng = np.random.default_rng(i)
    return {"i": i, "pixels": rng.integers(0, 255, size=(32, 32, 3), dtype=np.uint8), "text": "x" * (i % 200)}


def flip(payload: dict[str, object]) -> dict[str, object]:
    """A light per-sample map (module-level, so process workers can import it)."""
    pixels = payload["pixels"]
    assert isinstance(pixels, np.ndarray)
    return {"i": np.int64(payload["i"]), "pixels": pixels[:, ::-1].copy(), "n": np.int32(len(str(payload["text"])))}


def build() -> Pipeline:
    ds = Dataset.from_records("soak", [make_record(i) for i in range(5000)], shard_size=500)
    ws = StaticMixtureWorkSource([ds], chunk_size=64, seed=1, exhaustion="repeat")
    return (
        Pipeline(ws)
        .map_transform(flip, parallelism=2, runner="processes")
        .shuffle(256, seed=2)
        .batch(32)
        .options(lanes=4, runner="threads", flush_every_k_chunks=4)
    )


def resources() -> dict[str, int]:
    """RSS (bytes), open fds, threads and children of this process (Linux /proc)."""
    status = Path("/proc/self/status").read_text().splitlines()
    rss = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS:"))
    fds = len(os.listdir("/proc/self/fd"))
    pid = os.getpid()
    try:
        children = len(Path(f"/proc/{pid}/task/{pid}/children").read_text().split())
    except OSError:
        children = -1
    return {"rss": rss, "fds": fds, "threads": threading.active_count(), "children": children}


def soak(seconds: float, every: float, out: object = sys.stdout) -> list[dict[str, int]]:
    """Run for ``seconds``; return one resource report every ``every`` seconds (the first after warm-up).

    Time counts from the first batch, not from the start: building the data and starting the worker
    processes can take seconds on a loaded machine, and a first report taken before the pipeline
    runs at full speed would compare everything after it with a half-started pipeline.
    """
    reports: list[dict[str, int]] = []
    t0 = next_report = 0.0
    n = 0
    print(f"{'t (s)':>6} {'batches':>9} {'RSS MiB':>8} {'fds':>5} {'threads':>8} {'children':>9}", file=out, flush=True)
    with build() as p:
        for _ in p:
            n += 1
            now = time.monotonic()
            if n == 1:
                t0, next_report = now, now + every
            if now >= next_report:
                r = resources() | {"batches": n}
                reports.append(r)
                print(
                    f"{now - t0:6.0f} {n:9d} {r['rss'] / 2**20:8.1f} {r['fds']:5d} {r['threads']:8d} {r['children']:9d}",
                    file=out,
                    flush=True,
                )
                next_report += every
            if now - t0 >= seconds:
                break
    return reports


def flat(reports: list[dict[str, int]], rss_slack_mib: float = 64) -> list[str]:
    """What grew after the first report (empty when everything stayed flat).

    RSS may grow by 20% or ``rss_slack_mib``, whichever is more (allocator noise); scale the slack
    with the run's length to catch a leak of a given rate.
    """
    if len(reports) < 2:
        return ["too few reports"]
    first, problems = reports[0], []
    for r in reports[1:]:
        if r["rss"] > max(first["rss"] * 1.2, first["rss"] + rss_slack_mib * 2**20):
            problems.append(f"RSS grew from {first['rss'] / 2**20:.0f} to {r['rss'] / 2**20:.0f} MiB")
        for key in ("fds", "threads", "children"):
            if r[key] > first[key]:
                problems.append(f"{key} grew from {first[key]} to {r[key]}")
    return problems


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--every", type=float, default=30)
    ap.add_argument("--rss-slack", type=float, default=64, help="MiB RSS may grow after warm-up (default 64)")
    ap.add_argument("--check", action="store_true", help="exit 1 if anything grew after warm-up")
    args = ap.parse_args()
    problems = flat(soak(args.seconds, args.every), args.rss_slack)
    print("flat after warm-up" if not problems else "GREW: " + "; ".join(problems))
    if args.check and problems:
        sys.exit(1)


if __name__ == "__main__":
    main()
