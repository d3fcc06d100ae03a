"""Scale-out on Ray: samples/s of a CPU-heavy operator on 1, 2 and 3 one-CPU worker nodes, and a node loss.

The cluster is ``ray.cluster_utils.Cluster`` on this machine: a head (the driver's node, no
``scale`` resource) and worker raylets with ``num_cpus=1`` and ``{"scale": 1}`` each, so the
operator's actors (``num_cpus=1``, ``resources={"scale": 1}``) run one per worker node. It shows the
mechanism's overhead and linearity, not absolute speed: every "node" shares this machine's cores.

Measured, in one run:

* **samples/s with 1, 2, 3 worker nodes**: a pipeline ``fetch -> map_transform(cpu_heavy,
  parallelism=3) -> batch(64)`` whose map runs on the worker nodes; with fewer than three nodes the
  actors that do not fit wait in Ray's queue (the pool grows as nodes join). Counted after the
  pool is as large as the cluster allows and the first batches are out.
* **the cost of a node loss**, twice: on 3 nodes, one worker node is lost ``--kill-after`` seconds
  into a longer run (several passes over the records), either *killed* (its raylet and processes
  get SIGKILL, so the driver's connections to its actor close at once: a crash, an OOM kill, a
  preemption that stops the processes) or *vanished* (every process of the node is frozen with
  SIGSTOP, so nothing closes and only Ray's health check can tell: a machine powered off or cut from
  the network). The loss is detected through the executor's own figures in ``pipeline.metrics()``
  (an actor death, a task re-run); samples/s is counted in 1 s buckets, and the cost is the integral
  of the deficit from the loss until throughput is back (two 1 s buckets in a row at >= 50 % of
  the 2-node rate), against the rate once back (the median of the next 5 buckets), in seconds of
  that rate. The recovery must come within ``--loss-window`` seconds. Then a node joins and the
  time until the replacement actor runs there is measured. Every global batch of each run is
  hashed and compared with a threads run of the same pipeline.
* **the driver's RSS**: peak resident memory of this process while results stream in (results are
  fetched when done, at most the reorder window of them).

Ray declares a node dead after ``--health-check-failure-threshold`` failed checks in a row, one
every ``--health-check-period-ms``, each failing at once on a node whose port refuses (killed) or
after ``--health-check-timeout-ms`` on one that does not answer (vanished). Ray's defaults (3000,
10000, 5) take about 15 s for a killed node and 65 s for a vanished one; the benchmark uses 1000,
1000, 5: the settings a user lowers on a cluster of preemptible nodes so a lost node is noticed
sooner.

The benchmark exits with status 1, saying why, if a node was lost but the executor counted no
actor death, retry or replacement, if throughput did not recover within the window, or if a global
batch differs from the threads run: a figure that does not measure what it claims is not printed
as if it did.

Run: ``python benchmarks/bench_ray_scale.py`` (``--quick``, ``--json``). Requires
``pip install -e contrib/zephon-ray`` and psutil.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

# A single-machine cluster: keep Ray's addresses on 127.0.0.1 (must be set before Ray is imported).
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")

import psutil  # type: ignore[import-untyped]

from zephon_core import Dataset, Pipeline, StaticMixtureWorkSource
from zephon_core.hashing import hash_global_batch
from zephon_core.plugins import ZephonPluginManager

NODE: dict[str, Any] = {"num_cpus": 1, "resources": {"scale": 1}, "object_store_memory": 80 * 1024**2}
LANES = 2
RECOVERED = 0.5
"""A 1 s bucket counts as flowing again at this fraction of the 2-node rate (or of the rate before the
loss, if lower): well above a stall's near-zero buckets, well below the noise of a shared machine."""
RECOVERED_BUCKETS = 2
"""Flowing buckets in a row that end the lost-throughput integral."""
AFTER_BUCKETS = 5
"""Buckets from the recovery whose median is the rate once back (the integral's reference)."""


def cpu_heavy(payload: dict[str, Any]) -> dict[str, Any]:
    """About 0.3-0.5 ms of pure Python per 1 KB record (it holds the GIL the whole time)."""
    h = 0
    text = payload["text"]
    for _ in range(4):
        for ch in text:
            h = (h * 131 + ord(ch)) & 0xFFFFFFFF
    return {"h": h}


def records(n: int) -> list[dict[str, Any]]:
    alphabet = "abcdefghijklmnopqrstuvwxyz     "
    return [{"text": "".join(alphabet[(i * 7 + j * 13) % len(alphabet)] for j in range(1024))} for i in range(n)]


class RssSampler:
    """Peak RSS of this process, sampled every 50 ms on a daemon thread."""

    def __init__(self) -> None:
        self.proc = psutil.Process()
        self.peak: int = int(self.proc.memory_info().rss)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            self.peak = max(self.peak, int(self.proc.memory_info().rss))

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(timeout=5)
        return self.peak


def pipeline(
    recs: list[dict[str, Any]], plugins: ZephonPluginManager, runner: str = "ray_scale", passes: int = 1
) -> Pipeline:
    """The benchmark's pipeline; ``passes`` > 1 repeats the records (freshly shuffled) to make a longer run."""
    ds = Dataset.from_records("bench", recs, shard_size=4096)
    src = StaticMixtureWorkSource([ds], chunk_size=64, seed=0, exhaustion="repeat", stop_after_passes=passes)
    return (
        Pipeline(src, plugins=plugins)
        .map_transform(cpu_heavy, parallelism=3, runner=runner, name="cpu_heavy")
        .batch(microbatch_size=64)
        .options(lanes=LANES, runner="threads", queue_depth=8)
    )


def pool(p: Pipeline) -> dict[str, Any]:
    """The map step's executor figures from ``pipeline.metrics()``."""
    return dict(next(s for s in p.metrics()["stages"] if s["name"] == "cpu_heavy")["executor"])


def wait_for(what: str, cond: Callable[[], bool], timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.05)


def global_hashes(batches: Iterator[Any]) -> Iterator[str]:
    """SHA-256 of each global batch (``LANES`` consecutive batches of one rank), as the batches come."""
    group: list[Any] = []
    for b in batches:
        group.append(b)
        if len(group) == LANES:
            yield hash_global_batch(group)
            group = []


def rate(recs: list[dict[str, Any]], plugins: ZephonPluginManager, nodes: int) -> float:
    """Samples/s with ``nodes`` worker nodes, after the pool has ``nodes`` actors and 2 batches are out."""
    p = pipeline(recs, plugins)
    with p:
        it = iter(p)
        next(it)
        wait_for(f"{nodes} actors", lambda: pool(p)["actors"] >= nodes)
        next(it)
        t0, n = time.perf_counter(), 0
        for b in it:
            n += len(b)
        return n / (time.perf_counter() - t0)


class MetricsWatch:
    """Polls the executor's figures every 100 ms: when the pool first counted a death, a re-run, a full pool."""

    def __init__(self, p: Pipeline) -> None:
        self.p = p
        self.first_death: float | None = None
        self.first_retry: float | None = None
        self.full_since: float | None = None  # the pool has 3 running actors again (after a death)
        self.last: dict[str, Any] = pool(p)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            now = time.perf_counter()
            try:
                m = pool(self.p)
            except Exception:  # the pipeline closed under us: keep the last figures
                return
            self.last = m
            if self.first_death is None and sum(m["actor_deaths"].values()) > 0:
                self.first_death = now
            if self.first_retry is None and m["retries"] > 0:
                self.first_retry = now
            if self.first_death is not None and self.full_since is None and m["actors"] >= 3:
                self.full_since = now

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        self._thread.join(timeout=5)
        return self.last


def buckets(stamps: list[tuple[float, int]], origin: float) -> dict[int, int]:
    """Samples per 1 s bucket, bucket ``k`` covering ``[origin + k, origin + k + 1)`` seconds."""
    out: dict[int, int] = {}
    for t, n in stamps:
        k = math.floor(t - origin)
        out[k] = out.get(k, 0) + n
    return out


def node_loss(
    recs: list[dict[str, Any]],
    plugins: ZephonPluginManager,
    cluster: Any,
    rates: dict[int, float],
    passes: int,
    mode: str,
    kill_after: float,
    window: float,
) -> dict[str, Any]:
    """Lose one of three worker nodes mid-run, measure until throughput is back, then let a node join.

    ``mode`` ``"kill"``: the node's raylet and processes are killed, so the driver's connections to
    its actors close at once (a crash, an OOM kill, a preemption that stops the processes).
    ``"vanish"``: every process of the node is frozen (SIGSTOP), so nothing closes and only Ray's
    health check can tell (a machine powered off or cut from the network); it is killed for good once
    the run is over. The run goes on to the end of its data, so every global batch it makes is
    compared. Returns the run's figures (see the module docstring) and the hash of every global batch.
    """
    p = pipeline(recs, plugins, passes=passes)
    stamps: list[tuple[float, int]] = []
    batches: list[Any] = []
    killed_at: float | None = None
    killer: threading.Thread | None = None
    removed_in: list[float] = []
    joined_at: float | None = None
    recovered_at: float | None = None  # start of the first recovered bucket; inf: none within the window
    victim: Any = None
    frozen: list[Any] = []
    load_start = os.getloadavg()

    def remove() -> None:
        t0 = time.perf_counter()
        if mode == "kill":
            cluster.remove_node(victim, allow_graceful=False)
        else:
            frozen.extend(freeze(victim))
        removed_in.append(time.perf_counter() - t0)

    try:
        with p:
            it = iter(p)
            batches.append(next(it))
            wait_for("3 actors", lambda: pool(p)["actors"] >= 3)
            watch = MetricsWatch(p)
            t_start = time.perf_counter()
            checked = 0.0
            for b in it:
                now = time.perf_counter()
                stamps.append((now, len(b)))
                batches.append(b)
                if killed_at is None and now - t_start > kill_after:
                    victim = cluster.list_all_nodes()[-1]  # a worker node (the head is first)
                    killer = threading.Thread(target=remove, daemon=True)
                    killed_at = time.perf_counter()
                    killer.start()
                elif killed_at is not None and joined_at is None and now > checked + 0.5:
                    checked = now
                    threshold = RECOVERED * min(rates[2], _rate_before(stamps, killed_at, kill_after))
                    if recovered_at is None and watch.first_death is not None:
                        recovered_at = _recovery(stamps, killed_at, watch.first_death, threshold)
                    if recovered_at is None and now - killed_at > window:
                        recovered_at = math.inf
                    if recovered_at is not None and now >= min(recovered_at + AFTER_BUCKETS + 1, killed_at + window):
                        # an autoscaler's answer: a node joins (in this thread: Ray's node start sets
                        # signal handlers); the replacement actor waiting for room starts there
                        if frozen:  # Ray declared the vanished node dead; Cluster still lists it
                            bury(cluster, victim, frozen)
                        cluster.add_node(**NODE)
                        cluster.wait_for_nodes(timeout=120)
                        joined_at = time.perf_counter()
            final = watch.stop()
            load_end = os.getloadavg()
    finally:  # never leave a frozen node's processes behind, whatever failed
        if killer is not None:
            killer.join(timeout=120)
        for proc in frozen:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()
    if frozen:  # the run ended before a node joined
        bury(cluster, victim, frozen)
    if killed_at is None:
        raise RuntimeError(
            f"the run ended {stamps[-1][0] - t_start:.1f} s in, before the node kill at {kill_after:g} s; "
            "raise --records"
        )
    hist = buckets(stamps, killed_at)
    before = _rate_before(stamps, killed_at, kill_after)
    out: dict[str, Any] = {
        "mode": mode,
        "passes": passes,
        "global_batches": len(batches) // LANES,
        "kill_after_s": kill_after,
        "window_s": window,
        "rate_2_nodes": rates[2],
        "rate_before": before,
        "rate_after": None,
        "remove_node_s": removed_in[0] if removed_in else None,
        "detected_after_s": None if watch.first_death is None else watch.first_death - killed_at,
        "retried_after_s": None if watch.first_retry is None else watch.first_retry - killed_at,
        "recovered_after_s": None,
        "lost_s": None,
        "replacement_after_join_s": None,
        "retries": final["retries"],
        "replacements": final["replacements"],
        "deaths": dict(final["actor_deaths"]),
        "peak_actors": final["peak_actors"],
        "actors_at_end": final["actors"],
        "load_average": [load_start[0], load_end[0]],
        "buckets": {str(k): hist[k] for k in sorted(hist)},
        "hashes": list(global_hashes(iter(batches))),
    }
    if recovered_at is not None and recovered_at - killed_at <= window:
        k_end = math.floor(recovered_at - killed_at)
        after = statistics.median(hist.get(k, 0) for k in range(k_end, k_end + AFTER_BUCKETS))
        out["recovered_after_s"] = recovered_at - killed_at
        out["rate_after"] = after
        # the deficit against the rate the run went on at with two nodes, from the kill until it was back
        out["lost_s"] = max(0.0, sum(after - hist.get(k, 0) for k in range(k_end)) / after)
    if joined_at is not None and watch.full_since is not None and watch.full_since >= joined_at:
        out["replacement_after_join_s"] = watch.full_since - joined_at
    return out


def freeze(node: Any) -> list[Any]:
    """Stop (SIGSTOP) every process of a Ray node, its raylet first: a machine that vanished.

    Returns the stopped processes, to be killed later (they never run again).
    """
    procs: list[Any] = []
    for infos in node.all_processes.values():
        for info in infos:
            try:
                top = psutil.Process(info.process.pid)
                procs.append(top)
                top.suspend()
                for child in top.children(recursive=True):  # workers, agents
                    child.suspend()
                    procs.append(child)
            except psutil.NoSuchProcess:
                pass
    return procs


def bury(cluster: Any, node: Any, frozen: list[Any]) -> None:
    """Kill a frozen node's processes for good and take it off the cluster's list (once)."""
    for proc in frozen:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    frozen.clear()
    cluster.remove_node(node, allow_graceful=False)


def _rate_before(stamps: list[tuple[float, int]], killed_at: float, kill_after: float) -> float:
    """Samples/s in the whole seconds before the kill (three nodes)."""
    hist = buckets(stamps, killed_at)
    before = [hist.get(k, 0) for k in range(-int(kill_after) + 1, 0)] or [hist.get(-1, 0)]
    return sum(before) / len(before)


def _recovery(stamps: list[tuple[float, int]], killed_at: float, detected: float, threshold: float) -> float | None:
    """Start of the first run of recovered 1 s buckets after the loss was detected, or None (not yet)."""
    hist = buckets(stamps, killed_at)
    last = math.floor(stamps[-1][0] - killed_at)  # the bucket still filling is not counted
    k = max(0, math.floor(detected - killed_at))
    while k + RECOVERED_BUCKETS <= last:
        if all(hist.get(k + j, 0) >= threshold for j in range(RECOVERED_BUCKETS)):
            return killed_at + k
        k += 1
    return None


def reference_hashes(recs: list[dict[str, Any]], plugins: ZephonPluginManager, passes: int) -> list[str]:
    """Every global batch's hash of the same pipeline with the map on threads (no Ray, no loss)."""
    p = pipeline(recs, plugins, runner="threads", passes=passes)
    with p:
        return list(global_hashes(iter(p)))


MODES = {"kill": "node killed (its processes exit)", "vanish": "node vanished (frozen, health check)"}


def problems(loss: dict[str, Any], ref: list[str]) -> list[str]:
    """What makes one node-loss run's figures untrustworthy; empty when they measure what they claim."""
    found = []
    what = f"node loss ({loss['mode']})"
    if not loss["deaths"] or loss["retries"] == 0 or loss["replacements"] == 0:
        found.append(
            f"{what}: a worker node was removed but pipeline.metrics() counted deaths={loss['deaths']}, "
            f"retries={loss['retries']}, replacements={loss['replacements']}: the loss was not measured"
        )
    if loss["lost_s"] is None:
        found.append(
            f"{what}: throughput did not come back to {RECOVERED:.0%} of the 2-node rate (or of the rate "
            f"before the loss, if lower) within --loss-window {loss['window_s']:g} s after it"
        )
    if loss["hashes"] != ref:
        diff = next(
            (i for i, (a, b) in enumerate(zip(loss["hashes"], ref)) if a != b), min(len(ref), len(loss["hashes"]))
        )
        found.append(
            f"{what}: global batch {diff} differs from the threads run "
            f"({len(loss['hashes'])} against {len(ref)} global batches)"
        )
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer records per rate measurement")
    ap.add_argument("--records", type=int, default=None, help="records per rate measurement (default 6000, quick 2000)")
    ap.add_argument("--kill-after", type=float, default=5.0, help="seconds of a node-loss run before a node is lost")
    ap.add_argument(
        "--loss-window",
        type=float,
        default=30.0,
        help="seconds after the loss within which throughput must recover (else the benchmark fails)",
    )
    ap.add_argument(
        "--loss-mode",
        choices=[*MODES, "both"],
        default="both",
        help="kill: the node's processes are killed; vanish: they are frozen, so only the health check tells",
    )
    ap.add_argument("--health-check-period-ms", type=int, default=1000, help="Ray's health_check_period_ms")
    ap.add_argument("--health-check-timeout-ms", type=int, default=1000, help="Ray's health_check_timeout_ms")
    ap.add_argument(
        "--health-check-failure-threshold", type=int, default=5, help="Ray's health_check_failure_threshold"
    )
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args()
    checks = ("health_check_period_ms", "health_check_timeout_ms", "health_check_failure_threshold")
    for name in ("kill_after", "loss_window", *checks):
        if getattr(args, name) <= 0:
            ap.error(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")
    n = args.records or (2000 if args.quick else 6000)
    if n < 640:
        ap.error(f"--records must be at least 640 (ten tasks of 64), got {n}")
    modes = list(MODES) if args.loss_mode == "both" else [args.loss_mode]
    recs = records(n)
    # Ray prints the errors it publishes to the driver (a raylet that died, a node marked dead) on
    # stdout; they go to stderr here, so stdout holds only the report (or the JSON).
    with contextlib.redirect_stdout(sys.stderr):
        results = measure(recs, args, modes)
    failed = results["problems"]
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        report(results, n)
    if failed:
        for msg in failed:
            print(f"bench_ray_scale: FAILED: {msg}", file=sys.stderr)
        sys.exit(1)


def measure(recs: list[dict[str, Any]], args: argparse.Namespace, modes: list[str]) -> dict[str, Any]:
    """Start the cluster, measure the rates and the node losses, then the threads run to compare with."""
    import ray
    from ray.cluster_utils import Cluster
    from zephon_ray import ray_runner_plugin

    folder = tempfile.mkdtemp(prefix="zbs-", dir="/tmp")  # short: Unix socket paths < 108 bytes
    os.makedirs(os.path.join(folder, "ray"))
    os.environ["TMPDIR"] = os.environ["RAY_TMPDIR"] = folder
    load_before = os.getloadavg()
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 1,
            "temp_dir": folder,
            "include_dashboard": False,
            "object_store_memory": 80 * 1024**2,
            "_system_config": {
                "health_check_period_ms": args.health_check_period_ms,
                "health_check_timeout_ms": args.health_check_timeout_ms,
                "health_check_failure_threshold": args.health_check_failure_threshold,
                "health_check_initial_delay_ms": 0,
            },
        },
    )
    plugins = ZephonPluginManager(  # the kernel's built-ins and this runner: nothing else is needed
        load_entrypoints=False,
        plugins=[ray_runner_plugin("ray_scale", actor_options={"num_cpus": 1, "resources": {"scale": 1}})],
    )
    rss = RssSampler()
    rss_start = rss.peak
    results: dict[str, Any] = {"ray": ray.__version__, "samples_per_s": {}, "node_loss": []}
    rates: dict[int, float] = results["samples_per_s"]
    try:
        cluster.add_node(**NODE)
        ray.init(address=cluster.address, log_to_driver=False)
        rss_start = int(rss.proc.memory_info().rss)
        for nodes in (1, 2, 3):
            if nodes > 1:
                cluster.add_node(**NODE)
                cluster.wait_for_nodes(timeout=120)
            rates[nodes] = rate(recs, plugins, nodes)
        # long enough for the run before the loss, the window, a node joining and a margin, at the 3-node rate
        passes = max(2, math.ceil(rates[3] * (args.kill_after + args.loss_window + 15.0) / len(recs)))
        for mode in modes:  # each ends with three worker nodes again (one joined)
            results["node_loss"].append(
                node_loss(recs, plugins, cluster, rates, passes, mode, args.kill_after, args.loss_window)
            )
    finally:
        results["driver_rss_mib"] = {"start": rss_start / 2**20, "peak": rss.stop() / 2**20}
        ray.shutdown()
        cluster.shutdown()  # type: ignore[no-untyped-call]
        shutil.rmtree(folder, ignore_errors=True)
    ref = reference_hashes(recs, plugins, passes)  # after Ray: it does not count in the driver's RSS
    failed: list[str] = []
    for loss in results["node_loss"]:
        failed += problems(loss, ref)
        loss["batches_equal_threads"] = loss.pop("hashes") == ref
    results["speedup_1_to_3"] = rates[3] / rates[1]
    results["load_average"] = {"before": list(load_before), "after": list(os.getloadavg())}
    results["health_check"] = {
        "period_ms": args.health_check_period_ms,
        "timeout_ms": args.health_check_timeout_ms,
        "failure_threshold": args.health_check_failure_threshold,
    }
    results["problems"] = failed
    return results


def _s(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1f} s"


def report(results: dict[str, Any], n: int) -> None:
    """The figures as Markdown tables and lines (what docs/ray.md shows)."""
    lb, la = results["load_average"]["before"], results["load_average"]["after"]
    hc = results["health_check"]
    print(
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"Ray {results['ray']}; {n:,} records of 1 KB, 64 per task; load average (1/5/15 min) "
        f"{lb[0]:.1f}/{lb[1]:.1f}/{lb[2]:.1f} before, {la[0]:.1f}/{la[1]:.1f}/{la[2]:.1f} after "
        "(other work skews the figures)"
    )
    print()
    r = results["samples_per_s"]
    print("| worker nodes (1 CPU each) | samples/s | vs 1 node |")
    print("|---:|---:|---:|")
    for k in (1, 2, 3):
        print(f"| {k} | {r[k]:,.0f} | {r[k] / r[1]:.2f}x |")
    losses = results["node_loss"]
    print()
    print(
        f"one of 3 worker nodes lost {losses[0]['kill_after_s']:g} s into a run of {losses[0]['passes']} passes "
        f"(Ray health check every {hc['period_ms']} ms, {hc['timeout_ms']} ms timeout, "
        f"dead after {hc['failure_threshold']} failures):"
    )
    print()
    print("| figure | " + " | ".join(MODES[x["mode"]] for x in losses) + " |")
    print("|---|" + "---:|" * len(losses))

    def row(name: str, cell: Callable[[dict[str, Any]], str]) -> None:
        print(f"| {name} | " + " | ".join(cell(x) for x in losses) + " |")

    row("1-minute load average at the run's start / end", lambda x: "{:.1f} / {:.1f}".format(*x["load_average"]))
    row("samples/s before the loss (3 nodes)", lambda x: f"{x['rate_before']:,.0f}")
    row("loss seen in pipeline.metrics() (first actor death) after", lambda x: _s(x["detected_after_s"]))
    row("first task re-run after", lambda x: _s(x["retried_after_s"]))
    row("throughput back (2 s in a row at >= 50 % of the 2-node rate) after", lambda x: _s(x["recovered_after_s"]))
    row("**throughput lost** (seconds of the rate once back)", lambda x: f"**{_s(x['lost_s'])}**")
    row(
        "samples/s once back (2 nodes; median of 5 s)",
        lambda x: "n/a" if x["rate_after"] is None else f"{x['rate_after']:,.0f}",
    )
    row("actor deaths (by reason)", lambda x: ", ".join(f"{v} {k}" for k, v in x["deaths"].items()) or "none")
    row("tasks re-run (retries) / replacement actors", lambda x: f"{x['retries']} / {x['replacements']}")
    row("replacement actor running after a node joined", lambda x: _s(x["replacement_after_join_s"]))
    row(
        "global batches equal to the threads run (SHA-256)",
        lambda x: f"{'all' if x['batches_equal_threads'] else 'NOT all'} {x['global_batches']:,}",
    )
    for x in losses:
        hist = {int(k): v for k, v in x["buckets"].items()}
        hi = min(max(hist), math.ceil(x["recovered_after_s"] or x["window_s"]) + 3)
        print()
        print(
            f"{x['mode']}: samples per 1 s bucket around the loss (0 = the second after it): "
            + ", ".join(f"{k}: {hist.get(k, 0)}" for k in range(-3, hi + 1))
        )
    m = results["driver_rss_mib"]
    print()
    print(f"driver RSS: {m['start']:.0f} MiB with Ray connected, {m['peak']:.0f} MiB peak")


if __name__ == "__main__":
    main()
