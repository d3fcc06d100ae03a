"""Large payloads through the runners: 150 KB images per sample, side by side in one run.

(a) a light map (flip left-right, a view) then ``batch(32)``, map parallelism 2: samples/s and
    end-to-end GB/s for the inline, threads and processes runners (processes: fetch and map fused
    into one pool, collation on threads; also unfused, fetch and map each in its own pool, and with
    only the map on processes), Grain's ``mp_prefetch`` with 2 workers, and the reference implementation
    ``zephon==0.2.0`` (threads and its process runner); (a2) the same with an upside-down flip, whose
    copy runs at memory speed, to tell the runners' cost from the cost of copying a left-right flip;
(b) the same with a map that also holds the GIL for about 0.5 ms of pure Python per sample: threads
    against processes, and the ratio;
(c) time to first batch with the processes runner: in a fresh interpreter (the fork server boots)
    and again in the same interpreter; also for 3,000 in-memory records (``Dataset.from_records``),
    whose reader must first reach the fetch worker.

The data is the same everywhere: sample *i* is ``{"image": pool[i % 64], "index": i}``, where ``pool``
holds 64 random 224x224x3 uint8 images made from seed 0 in each process (a reader that is cheap to
send to workers, like a file reader; its reads cost nothing on any runner). Every loader stacks each
batch into one (32, 224, 224, 3) array; the reference's batches are lists of records, so its timed
loop stacks them.

Run: ``python benchmarks/bench_transport.py [--samples 3000] [--repeats 2]
[--reference-python /tmp/refvenv/bin/python]``. The reference runs in its own virtual environment
(``python3 -m venv /tmp/refvenv && /tmp/refvenv/bin/pip install zephon==0.2.0``); without it that
row is skipped. Grain rows need ``pip install grain``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from zephon_core import Dataset, Pipeline, Reader, ShardInfo, StaticMixtureWorkSource

IMAGE = (224, 224, 3)
SAMPLE_BYTES = 224 * 224 * 3
BATCH = 32
POOL = 64
_pool: list[np.ndarray] = []


def pool() -> list[np.ndarray]:
    """The 64 distinct images every loader reads from, made once per process."""
    if len(_pool) < POOL:
        rng = np.random.default_rng(0)
        _pool[:] = [rng.integers(0, 256, IMAGE, dtype=np.uint8) for _ in range(POOL)]  # one step: thread-safe
    return _pool


def sample(i: int) -> dict[str, Any]:
    # A view of its own per sample: pickle's memo must not send an image twice in one message as one.
    return {"image": pool()[i % POOL][:], "index": i}


class PoolReader(Reader):
    """Sample ``i`` of the benchmark (see the module docstring); pickles as two integers."""

    format = "bench-pool"

    def __init__(self, n: int, shard_size: int = 1024) -> None:
        self.n = n
        self.shard_size = shard_size

    def shards(self) -> list[ShardInfo]:
        s = self.shard_size
        return [ShardInfo(f"pool-{k}", min(s, self.n - k * s)) for k in range((self.n + s - 1) // s)]

    def read(self, shard: int, indices: np.ndarray) -> list[dict[str, Any]]:
        base = shard * self.shard_size
        return [sample(base + i) for i in indices.tolist()]


class PoolSource:
    """The same samples as a random-access source for Grain."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict[str, Any]:
        return sample(int(i))


def flip(p: dict[str, Any]) -> dict[str, Any]:
    """The light map: a horizontal flip (a view, as ``np.fliplr`` gives)."""
    return {"image": p["image"][:, ::-1], "index": p["index"]}


def flip_rows(p: dict[str, Any]) -> dict[str, Any]:
    """An upside-down flip (a view too, but its rows stay contiguous, so copying it runs at memory
    speed): separates what the runners cost from what copying a left-right flip costs (3-byte pixels
    in reverse order, about 0.3 ms per image on this machine, on every runner)."""
    return {"image": p["image"][::-1], "index": p["index"]}


@dataclass(frozen=True)
class BusyFlip:
    """The flip after ``iters`` steps of a pure-Python loop (holds the GIL; ~0.5 ms when calibrated)."""

    iters: int

    def __call__(self, p: dict[str, Any]) -> dict[str, Any]:
        x = 0
        for k in range(self.iters):
            x += k
        return {"image": p["image"][:, ::-1], "index": p["index"] + (x & 0)}


def calibrate(target_s: float = 0.0005) -> int:
    """Loop steps that take ``target_s`` here (the fastest of several tries: the machine is shared)."""
    n = 20_000
    best = min(_timed(BusyFlip(n), sample(0)) for _ in range(15))
    return max(1, int(n * target_s / best))


def _timed(fn: Callable[[dict[str, Any]], Any], p: dict[str, Any]) -> float:
    t0 = time.perf_counter()
    fn(p)
    return time.perf_counter() - t0


# -- one measurement -------------------------------------------------------------------------------
@dataclass
class Run:
    samples: int
    first_s: float  # from building the loader to the first batch in hand
    rate: float  # samples/s after the first batch


def measure(batches: Callable[[], Iterable[Any]], size: Callable[[Any], int]) -> Run:
    t0 = time.perf_counter()
    it: Iterator[Any] = iter(batches())
    first = next(it)
    t1 = time.perf_counter()
    n0 = size(first)
    n = n0
    for b in it:
        n += size(b)
    t2 = time.perf_counter()
    return Run(n, t1 - t0, (n - n0) / (t2 - t1))


MAP_ONLY = "processes, map only"
"""The map on processes; fetch and batch (collation) on threads in the training process."""

UNFUSED = "processes, fuse=False"
"""Fetch and map on processes, each in its own pool (as before fusion): a sample crosses into the
map's worker and back."""


def zephon_pipeline(n: int, runner: str, fn: Callable[[dict[str, Any]], Any], parallelism: int = 2) -> Pipeline:
    ws = StaticMixtureWorkSource([Dataset("images", PoolReader(n))], chunk_size=BATCH, seed=0)
    if runner == MAP_ONLY:
        p = Pipeline(ws).fetch(runner="threads").map_transform(fn, parallelism=parallelism, runner="processes")
        return p.batch(BATCH, runner="threads").options(runner="threads")
    if runner == UNFUSED:
        return Pipeline(ws).map_transform(fn, parallelism=parallelism).batch(BATCH).options(runner="processes", fuse=False)
    return Pipeline(ws).map_transform(fn, parallelism=parallelism).batch(BATCH).options(runner=runner)


def run_zephon(n: int, runner: str, fn: Callable[[dict[str, Any]], Any]) -> Run:
    p = zephon_pipeline(n, runner, fn)
    with p:
        return measure(lambda: p, len)


def run_grain(n: int, fn: Callable[[dict[str, Any]], Any], workers: int) -> Run:
    import grain

    def batches() -> Iterable[Any]:
        ds = grain.MapDataset.source(PoolSource(n)).map(fn).batch(BATCH).to_iter_dataset()
        if workers:
            ds = ds.mp_prefetch(grain.multiprocessing.MultiprocessingOptions(num_workers=workers))
        return ds

    return measure(batches, lambda b: len(b["index"]))


# -- the reference implementation, in its own interpreter -------------------------------------------
REFERENCE_SCRIPT = textwrap.dedent(
    '''
    import json, sys, time
    import numpy as np
    from zephon import Dataset, InMemoryShard, MixtureSpec, Pipeline, StaticMixtureWorkSource

    N, ITERS, SHARD = int(sys.argv[1]), int(sys.argv[2]), 1024
    _pool = []

    def sample(i):
        if len(_pool) < 64:
            rng = np.random.default_rng(0)
            _pool[:] = [rng.integers(0, 256, (224, 224, 3), dtype=np.uint8) for _ in range(64)]
        return {"image": _pool[i % 64][:], "index": i}

    class PoolShard(InMemoryShard):
        """The benchmark's samples start..start+n, made on read (no rows held)."""

        def __init__(self, start, n):
            super().__init__([])
            self.start, self.n = start, n

        def __len__(self):
            return self.n

        def __getitem__(self, i):
            return sample(self.start + int(i))

        def getsamples(self, indices):
            return [self[i] for i in indices]

    def flip(p):
        return {"image": p["image"][:, ::-1], "index": p["index"]}

    def busy_flip(p):
        x = 0
        for k in range(ITERS):
            x += k
        return {"image": p["image"][:, ::-1], "index": p["index"] + (x & 0)}

    def run(runner, fn):
        shards = {k: PoolShard(k * SHARD, min(SHARD, N - k * SHARD)) for k in range((N + SHARD - 1) // SHARD)}
        ws = StaticMixtureWorkSource(
            datasets=[Dataset.from_dict("images", shards)], mixture=MixtureSpec({"images": 1.0}),
            chunk_size=32, seed=0, stop_after_passes=1,
        )
        t0 = time.perf_counter()
        it = iter(Pipeline(ws).map_transform(fn, parallelism=2).batch(32).options(runner=runner))
        first = stack(next(it))
        t1 = time.perf_counter()
        n0 = n = len(first)
        for b in it:
            n += len(stack(b))
        t2 = time.perf_counter()
        return {"samples": n, "first_s": t1 - t0, "rate": (n - n0) / (t2 - t1)}

    def stack(batch):
        """Its batches are lists of records: stack the images, as the other loaders do before a step."""
        return np.stack([r.payload["image"] for r in batch.records])

    if __name__ == "__main__":
        for work, fn in [("a", flip), ("b", busy_flip)]:
            for runner in ["threads", "process"]:
                print(json.dumps({"work": work, "runner": runner, **run(runner, fn)}), flush=True)
    '''
)


def run_reference(python: str, n: int, iters: int, workdir: str) -> dict[tuple[str, str], Run]:
    script = os.path.join(workdir, "bench_transport_reference.py")
    with open(script, "w") as f:
        f.write(REFERENCE_SCRIPT)
    out = subprocess.run(
        [python, script, str(n), str(iters)], capture_output=True, text=True, timeout=1800, cwd=workdir
    )
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    runs = {}
    for line in out.stdout.splitlines():
        if line.startswith("{"):
            d = json.loads(line)
            runs[(d["work"], d["runner"])] = Run(d["samples"], d["first_s"], d["rate"])
    return runs


# -- (c) time to first batch, in a fresh interpreter ------------------------------------------------
def first_batch_main(n: int) -> None:
    """Child mode: time to the first batch on processes, cold then warm, then for in-memory records."""
    cold = run_first(lambda: zephon_pipeline(n, "processes", flip))
    warm = run_first(lambda: zephon_pipeline(n, "processes", flip))
    records = [sample(i) | {"image": pool()[i % POOL].copy()} for i in range(3000)]
    ws = StaticMixtureWorkSource([Dataset.from_records("images", records, shard_size=1024)], chunk_size=BATCH)
    mem = run_first(lambda: Pipeline(ws).map_transform(flip, parallelism=2).batch(BATCH).options(runner="processes"))
    print(json.dumps({"cold": cold, "warm": warm, "records": mem}))


def run_first(build: Callable[[], Pipeline]) -> float:
    t0 = time.perf_counter()
    p = build()
    with p:
        next(iter(p))
        return time.perf_counter() - t0


def first_batch(n: int, tries: int) -> list[dict[str, float]]:
    out = []
    for _ in range(tries):
        cmd = [sys.executable, os.path.abspath(__file__), "--first-batch-child", "--samples", str(n)]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if res.returncode != 0:
            raise RuntimeError(res.stderr[-2000:])
        out.append(json.loads(res.stdout.strip().splitlines()[-1]))
    return out


# -- the report -------------------------------------------------------------------------------------
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=3000)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--reference-python", default="/tmp/refvenv/bin/python")
    ap.add_argument("--first-batch-tries", type=int, default=3)
    ap.add_argument("--first-batch-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    n = args.samples
    if args.first_batch_child:
        first_batch_main(n)
        return
    try:
        import grain  # noqa: F401

        have_grain = True
    except ImportError:
        have_grain = False
    iters = calibrate()
    busy = BusyFlip(iters)
    print(
        f"{n} samples of {SAMPLE_BYTES:,} bytes, batch {BATCH}, map parallelism 2; "
        f"GIL-holding map: {iters} loop steps (~0.5 ms); best of {args.repeats}, machine load {os.getloadavg()[0]:.1f}"
    )
    runs: dict[tuple[str, str], list[Run]] = {}
    for _ in range(args.repeats):  # interleave the loaders so the shared machine's noise hits all alike
        for runner in ("inline", "threads", "processes", UNFUSED, MAP_ONLY):
            runs.setdefault(("a", f"zephon {runner}"), []).append(run_zephon(n, runner, flip))
        for runner in ("threads", "processes", UNFUSED, MAP_ONLY):
            runs.setdefault(("a2", f"zephon {runner}"), []).append(run_zephon(n, runner, flip_rows))
        for runner in ("threads", "processes", UNFUSED, MAP_ONLY):
            runs.setdefault(("b", f"zephon {runner}"), []).append(run_zephon(n, runner, busy))
        if have_grain:
            for work, fn in (("a", flip), ("b", busy)):
                runs.setdefault((work, "grain mp_prefetch(2 workers)"), []).append(run_grain(n, fn, 2))
            runs.setdefault(("a", "grain, no workers"), []).append(run_grain(n, flip, 0))
    ref_note = ""
    if args.reference_python and os.path.exists(args.reference_python):
        try:
            for (work, runner), r in run_reference(args.reference_python, n, iters, "/tmp").items():
                runs.setdefault((work, f"zephon==0.2.0 {runner}"), []).append(r)
        except Exception as exc:
            ref_note = f"reference zephon==0.2.0 failed: {exc}"
    else:
        ref_note = (
            f"reference zephon==0.2.0 skipped: no interpreter at {args.reference_python!r} (see --reference-python)"
        )
    if not have_grain:
        print("grain skipped: pip install grain")

    def best(key: tuple[str, str]) -> Run:
        return max(runs[key], key=lambda r: r.rate)

    sections = (
        ("a", "(a) light map: flip left-right (img[:, ::-1])"),
        ("a2", "(a2) the same with an upside-down flip (img[::-1]: rows stay contiguous)"),
        ("b", "(b) map holding the GIL ~0.5 ms/sample, then the left-right flip"),
    )
    for work, title in sections:
        print(f"\n{title}")
        print("| loader | samples/s | GB/s | first batch (s) | vs zephon threads |")
        print("|---|---:|---:|---:|---:|")
        ref = best((work, "zephon threads")).rate
        for key in [k for k in runs if k[0] == work]:
            r = best(key)
            print(
                f"| {key[1]} | {r.rate:,.0f} | {r.rate * SAMPLE_BYTES / 1e9:.2f} | {min(x.first_s for x in runs[key]):.2f} "
                f"| {r.rate / ref:.2f}x |"
            )
    if ref_note:
        print(ref_note)
    fb = first_batch(n, args.first_batch_tries)
    print(f"\n(c) time to first batch, processes runner, {len(fb)} fresh interpreters (min / median s)")
    for k, what in (
        ("cold", "light map, fresh interpreter (fork server boots)"),
        ("warm", "light map, second pipeline in the same interpreter"),
        ("records", "3,000 in-memory records (Dataset.from_records), same interpreter"),
    ):
        vals = [d[k] for d in fb]
        print(f"  {what:60s} {min(vals):.2f} / {statistics.median(vals):.2f}")


if __name__ == "__main__":
    main()
