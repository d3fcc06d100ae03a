"""Kernel throughput: fetch + shuffle + batch(32) of 1 KB text samples from memory, versus Grain.

Prints samples/s for the threads and processes runners at parallelism 1 and 2, and Grain's
``MapDataset.source(...).shuffle(...).batch(32)`` over the same data in the same run, with the
ratio; plus the size of ``state_dict()`` for 32 lanes. Run: ``python benchmarks/bench_kernel.py``.

``--metrics-overhead`` instead measures what the always-on metrics cost: the same pipelines run in
fresh processes with ``ZEPHON_METRICS=on`` and ``=off`` (read once at import, so each arm needs its
own process), alternating which goes first, and the median rates are compared (target: <= 2%).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import timeit
from collections.abc import Callable

import numpy as np

from zephon_core import Dataset, MixtureSpec, Pipeline, StaticMixtureWorkSource


def make_records(n: int) -> list[dict[str, str]]:
    rng = np.random.default_rng(0)
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz      ", dtype=np.uint8)
    return [{"text": letters[rng.integers(0, 32, 1024)].tobytes().decode()} for _ in range(n)]


def zephon(records: list[dict[str, str]], runner: str, parallelism: int, lanes: int = 4) -> float:
    return zephon_measure(records, runner, parallelism, lanes)[0]


def zephon_measure(
    records: list[dict[str, str]], runner: str, parallelism: int, lanes: int = 4
) -> tuple[float, float]:
    """(samples/s, CPU microseconds per sample): CPU time of this process and its worker processes,
    from the first batch to the end, which other load on a shared machine hardly changes."""
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
        t0, cpu0 = time.perf_counter(), _tree_cpu()
        n = 32 + sum(len(b) for b in it)
        rate = (n - 32) / (time.perf_counter() - t0)
        cpu = _tree_cpu() - cpu0
    return rate, 1e6 * cpu / (n - 32)


def _tree_cpu() -> float:
    """CPU seconds of this process and every process below it (worker processes, the forkserver),
    from /proc; elsewhere this process's own."""
    try:
        ticks = os.sysconf("SC_CLK_TCK")
        stats = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat") as f:
                        fields = f.read().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                stats[int(entry)] = (int(fields[1]), int(fields[11]) + int(fields[12]))  # ppid, utime + stime
    except (OSError, ValueError):
        return time.process_time()
    mine, frontier = {os.getpid()}, [os.getpid()]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, _) in stats.items():
            if ppid == parent and pid not in mine:
                mine.add(pid)
                frontier.append(pid)
    return sum(stats[p][1] for p in mine if p in stats) / ticks


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


def _child(runner: str, parallelism: int, samples: int) -> None:
    """One arm of --metrics-overhead: print this process's rate (and how many tasks ran) as JSON."""
    from zephon_core.runtime import metrics

    rate, cpu_us = zephon_measure(make_records(samples), runner, parallelism)
    print(json.dumps({"rate": rate, "cpu_us": cpu_us, "metrics": metrics.ENABLED}))


def metrics_overhead(samples: int, repeats: int) -> None:
    """Metrics on vs off per configuration, each run in a fresh process: the median rate (samples/s),
    and the median CPU time per sample, which is what the metrics add to and what other load on a
    shared machine disturbs least."""
    configs = [("threads", 1), ("threads", 2), ("processes", 1)]
    print(f"metrics overhead: fetch + shuffle + batch(32), {samples} x 1 KB samples, {repeats} runs per arm")
    print(
        f"  {'configuration':26s} {'samples/s on':>13s} {'off':>9s} {'cost':>6s}   "
        f"{'CPU us/sample on':>16s} {'off':>6s} {'cost':>6s}"
    )
    for runner, par in configs:
        got: dict[str, list[dict[str, float]]] = {"on": [], "off": []}
        for r in range(repeats):
            for mode in ("on", "off") if r % 2 == 0 else ("off", "on"):
                env = dict(os.environ, ZEPHON_METRICS=mode)
                cmd = [sys.executable, __file__, "--child", runner, str(par), "--samples", str(samples)]
                out = subprocess.run(cmd, env=env, capture_output=True, text=True)
                if out.returncode:
                    raise SystemExit(f"{runner}/{par} with metrics {mode} failed:\n{out.stderr[-3000:]}")
                res = json.loads(out.stdout.strip().splitlines()[-1])
                assert res["metrics"] == (mode == "on"), res
                got[mode].append(res)
        med = {m: {k: statistics.median(x[k] for x in got[m]) for k in ("rate", "cpu_us")} for m in got}
        on, off = med["on"], med["off"]
        name = f"{runner} parallelism {par}"
        print(
            f"  {name:26s} {on['rate']:>13,.0f} {off['rate']:>9,.0f} {100 * (1 - on['rate'] / off['rate']):>5.1f}%   "
            f"{on['cpu_us']:>16.2f} {off['cpu_us']:>6.2f} {100 * (on['cpu_us'] / off['cpu_us'] - 1):>5.1f}%"
        )
    for par in (1, 2):
        paired(min(samples, 50_000), max(20, 4 * repeats), par)
    accounted_cost(min(samples, 100_000))


def paired(samples: int, pairs: int, parallelism: int = 1) -> None:
    """Metrics on and off alternating in one process (threads runner): the switch is flipped
    between runs, so the two arms of each pair run seconds apart and share the machine's state; the
    median of the per-pair ratios is far steadier than two sets of separate processes on a busy box."""
    from zephon_core.runtime import metrics

    records = make_records(samples)
    ratios_rate, ratios_cpu = [], []
    for i in range(pairs):
        res = {}
        for on in (True, False) if i % 2 == 0 else (False, True):
            metrics.ENABLED = on
            res[on] = zephon_measure(records, "threads", parallelism)
        ratios_rate.append(res[True][0] / res[False][0])
        ratios_cpu.append(res[True][1] / res[False][1])
    metrics.ENABLED = True
    q = statistics.quantiles
    print(
        f"  paired in one process (threads, parallelism {parallelism}, {pairs} pairs of {samples} samples): "
        f"samples/s cost {100 * (1 - statistics.median(ratios_rate)):.1f}% "
        f"(quartiles {100 * (1 - q(ratios_rate, n=4)[2]):.1f}..{100 * (1 - q(ratios_rate, n=4)[0]):.1f}%), "
        f"CPU per sample cost {100 * (statistics.median(ratios_cpu) - 1):.1f}% "
        f"(quartiles {100 * (q(ratios_cpu, n=4)[0] - 1):.1f}..{100 * (q(ratios_cpu, n=4)[2] - 1):.1f}%)"
    )


def accounted_cost(samples: int) -> None:
    """The metrics' CPU per sample counted piece by piece, which a busy machine cannot blur: what
    timing one task costs (the TimedWorker wrapper and ``task_done``) times the tasks per sample, plus
    the accumulator/emitter timers (8 ``perf_counter()`` calls per message per stage, kept in both
    arms above) times the messages per sample, against the pipeline's CPU time per sample."""
    from zephon_core.runtime.metrics import StageMetrics, Timed, TimedWorker

    def best(fn: Callable[[], object], n: int = 200_000) -> float:
        return min(timeit.repeat(fn, number=n, repeat=5)) / n

    def ident(x: object) -> object:
        return x

    wrapped, m = TimedWorker(ident), StageMetrics("s", "threads", 1)
    done = Timed(None, 1.0, 2.0, "w")
    per_task = best(lambda: wrapped(1)) - best(lambda: ident(1)) + best(lambda: m.task_done(done))
    per_timer = best(time.perf_counter)
    records = make_records(samples)
    ds = Dataset.from_records("text", records, shard_size=4096)
    ws = StaticMixtureWorkSource([ds], mixture=MixtureSpec({"text": 1.0}), chunk_size=1024, seed=0)
    p = Pipeline(ws).shuffle(buffer_size=1024, seed=1).batch(microbatch_size=32).options(lanes=4)
    with p:
        n = sum(len(b) for b in p)
        stages = p.metrics()["stages"]
    tasks = sum(s["tasks"] for s in stages)
    # A stage handles about as many messages as the busier of its own tasks and its input's.
    messages = sum(max(s["tasks"], stages[i - 1]["tasks"] if i else s["tasks"]) for i, s in enumerate(stages))
    _, cpu_us = zephon_measure(records, "threads", 1)
    task_ns = 1e9 * tasks * per_task / n
    timer_ns = 1e9 * messages * 8 * per_timer / n
    print(
        f"  accounted (threads, parallelism 1): {tasks / n:.3f} tasks and {messages / n:.3f} stage messages per sample; "
        f"task timing {per_task * 1e9:.0f} ns/task = {task_ns:.0f} ns/sample, timers {per_timer * 1e9:.0f} ns x 8 per "
        f"message = {timer_ns:.0f} ns/sample; together {100 * (task_ns + timer_ns) / (1000 * cpu_us):.2f}% of "
        f"{cpu_us:.1f} us CPU per sample"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--samples", type=int, default=200_000)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--metrics-overhead", action="store_true", help="compare metrics on vs off instead")
    ap.add_argument("--child", nargs=2, metavar=("RUNNER", "PARALLELISM"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(args.child[0], int(args.child[1]), args.samples)
        return
    if args.metrics_overhead:
        metrics_overhead(args.samples, args.repeats)
        return
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
