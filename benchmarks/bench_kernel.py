"""Kernel throughput: fetch + shuffle + batch(32) of 1 KB text samples from memory, versus Grain.

Prints samples/s for the threads and processes runners at parallelism 1 and 2, and Grain's
``MapDataset.source(...).shuffle(...).batch(32)`` over the same data in the same run, with the
ratio; plus the size of ``state_dict()`` for 32 lanes. Run: ``python benchmarks/bench_kernel.py``.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from zephon_core import Dataset, MixtureSpec, Pipeline, StaticMixtureWorkSource


def make_records(n: int) -> list[dict[str, str]]:
    rng = np.random.default_rng(0)
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz      ", dtype=np.uint8)
    return [{"text": letters[rng.integers(0, 32, 1024)].tobytes().decode()} for _ in range(n)]


def zephon(records: list[dict[str, str]], runner: str, parallelism: int, lanes: int = 4) -> float:
    ds = Dataset.from_records("text", records, shard_size=4096)
    ws = StaticMixtureWorkSource([ds], mixture=MixtureSpec({"text": 1.0}), chunk_size=1024, seed=0)
    p = (
        Pipeline(ws)
        .fetch(parallelism=parallelism, runner=runner)
        .shuffle(buffer_size=1024, seed=1)
        .batch(microbatch_size=32, parallelism=parallelism, runner=runner)
        .options(lanes=lanes, runner=runner)
    )
    with p:
        it = iter(p)
        next(it)  # exclude start-up (process spawn) from the rate
        t0 = time.perf_counter()
        n = 32 + sum(len(b) for b in it)
        return (n - 32) / (time.perf_counter() - t0)


def grain_rate(records: list[dict[str, str]]) -> float:
    import grain.python as gp

    ds = gp.MapDataset.source(records).shuffle(seed=0).batch(32)
    t0 = time.perf_counter()
    n = 0
    for b in ds:
        n += len(b["text"])
    return n / (time.perf_counter() - t0)


def state_size(lanes: int = 32) -> int:
    records = make_records(4096)
    ds = Dataset.from_records("text", records, shard_size=1024)
    ws = StaticMixtureWorkSource([ds], mixture=MixtureSpec({"text": 1.0}), chunk_size=64, seed=0)
    with Pipeline(ws).shuffle(buffer_size=64).batch(microbatch_size=8).options(lanes=lanes) as p:
        for i, _ in enumerate(p):
            if i == 3 * lanes:
                break
        return len(json.dumps(p.state_dict()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--samples", type=int, default=200_000)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    records = make_records(args.samples)
    rows: list[tuple[str, float]] = []
    for _ in range(args.repeats):  # interleave systems so machine noise hits both alike
        rows.append(("grain MapDataset shuffle+batch(32)", grain_rate(records)))
        for runner in ("threads", "processes"):
            for par in (1, 2):
                rows.append((f"zephon {runner:9s} parallelism {par}", zephon(records, runner, par)))
    best: dict[str, float] = {}
    for name, rate in rows:
        best[name] = max(best.get(name, 0.0), rate)
    g = best["grain MapDataset shuffle+batch(32)"]
    print(f"fetch + shuffle + batch(32), {args.samples} x 1 KB samples from memory (best of {args.repeats})")
    for name, rate in best.items():
        print(f"  {name:40s} {rate:>12,.0f} samples/s   {rate / g:5.2f}x grain")
    print(f"state_dict() size for 32 lanes: {state_size(32)} bytes of JSON")


if __name__ == "__main__":
    main()
