"""Scale-out on Ray: samples/s of a CPU-heavy operator on 1, 2 and 3 one-CPU worker nodes, one run.

The cluster is ``ray.cluster_utils.Cluster`` on this machine: a head (the driver's node, no
``scale`` resource) and worker raylets with ``num_cpus=1`` and ``{"scale": 1}`` each, so the
operator's actors (``num_cpus=1``, ``resources={"scale": 1}``) run one per worker node. It shows the
mechanism's overhead and linearity, not absolute speed: every "node" shares this machine's cores.

Measured, in one run:

* **samples/s with 1, 2, 3 worker nodes**: a pipeline ``fetch -> map_transform(cpu_heavy,
  parallelism=3) -> batch(64)`` whose map runs on the worker nodes; with fewer than three nodes the
  actors that do not fit wait in Ray's queue (the pool grows as nodes join). Counted after the
  pool is as large as the cluster allows and the first batches are out.
* **the cost of a node loss**: on 3 nodes, one worker node is killed mid-run; the lost actor's task
  is re-run elsewhere. The cost is the samples the run fell behind the 2-node rate in the
  ``--loss-window`` seconds after the kill, expressed as seconds of 2-node throughput.
* **the driver's RSS**: peak resident memory of this process while results stream in (results are
  fetched when done, at most the reorder window of them).

Run: ``python benchmarks/bench_ray_scale.py`` (``--quick``, ``--json``). Requires
``pip install -e contrib/zephon-ray`` and psutil.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import tempfile
import threading
import time
from typing import Any

# A single-machine cluster: keep Ray's addresses on 127.0.0.1 (must be set before Ray is imported).
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")

import psutil  # type: ignore[import-untyped]

from zephon_core import Dataset, Pipeline, StaticMixtureWorkSource
from zephon_core.plugins import ZephonPluginManager

NODE: dict[str, Any] = {"num_cpus": 1, "resources": {"scale": 1}, "object_store_memory": 80 * 1024**2}


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


def pipeline(recs: list[dict[str, Any]], plugins: ZephonPluginManager) -> Pipeline:
    ds = Dataset.from_records("bench", recs, shard_size=4096)
    src = StaticMixtureWorkSource([ds], chunk_size=64, seed=0)
    return (
        Pipeline(src, plugins=plugins)
        .map_transform(cpu_heavy, parallelism=3, runner="ray_scale", name="cpu_heavy")
        .batch(microbatch_size=64)
        .options(lanes=2, runner="threads", queue_depth=8)
    )


def pool(p: Pipeline) -> dict[str, Any]:
    return dict(next(s for s in p.metrics()["stages"] if s["name"] == "cpu_heavy")["executor"])


def wait_for(what: str, cond: Any, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.05)


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


def node_loss(
    recs: list[dict[str, Any]], plugins: ZephonPluginManager, cluster: Any, two_node_rate: float, window: float
) -> dict[str, float]:
    """Kill one worker node mid-run on 3 nodes; the samples lost against the 2-node rate, in seconds."""
    p = pipeline(recs, plugins)
    stamps: list[tuple[float, int]] = []
    killed_at = 0.0
    with p:
        it = iter(p)
        next(it)
        wait_for("3 actors", lambda: pool(p)["actors"] >= 3)
        t_start = time.perf_counter()
        for b in it:
            now = time.perf_counter()
            stamps.append((now, len(b)))
            if not killed_at and now - t_start > 3.0:
                victim = cluster.list_all_nodes()[-1]
                killer = threading.Thread(target=cluster.remove_node, args=(victim,), kwargs={"allow_graceful": False})
                killed_at = time.perf_counter()
                killer.start()
        figures = pool(p)
    done = sum(n for t, n in stamps if killed_at <= t <= killed_at + window)
    lost = max(0.0, two_node_rate * window - done) / two_node_rate
    return {
        "lost_s": lost,
        "window_s": window,
        "retries": figures["retries"],
        "replacements": figures["replacements"],
        "deaths": sum(figures["actor_deaths"].values()),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer records")
    ap.add_argument("--records", type=int, default=None, help="records per measurement (default 6000, quick 2000)")
    ap.add_argument("--loss-window", type=float, default=6.0, help="seconds after the node kill that are counted")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    n = args.records or (2000 if args.quick else 6000)
    recs = records(n)

    import ray
    from ray.cluster_utils import Cluster
    from zephon_ray import ray_runner_plugin

    folder = tempfile.mkdtemp(prefix="zbs-", dir="/tmp")  # short: Unix socket paths < 108 bytes
    os.makedirs(os.path.join(folder, "ray"))
    os.environ["TMPDIR"] = os.environ["RAY_TMPDIR"] = folder
    load_before = os.getloadavg()[0]
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 1,
            "temp_dir": folder,
            "include_dashboard": False,
            "object_store_memory": 80 * 1024**2,
            "_system_config": {"health_check_period_ms": 1000, "health_check_failure_threshold": 5},
        },
    )
    plugins = ZephonPluginManager(
        plugins=[ray_runner_plugin("ray_scale", actor_options={"num_cpus": 1, "resources": {"scale": 1}})]
    )
    rss = RssSampler()
    rss_start = rss.peak
    results: dict[str, Any] = {"samples_per_s": {}}
    try:
        cluster.add_node(**NODE)
        ray.init(address=cluster.address, log_to_driver=False)
        for nodes in (1, 2, 3):
            if nodes > 1:
                cluster.add_node(**NODE)
                cluster.wait_for_nodes(timeout=120)
            results["samples_per_s"][nodes] = rate(recs, plugins, nodes)
        results["node_loss"] = node_loss(recs, plugins, cluster, results["samples_per_s"][2], args.loss_window)
    finally:
        results["driver_rss_mib"] = {"start": rss_start / 2**20, "peak": rss.stop() / 2**20}
        ray.shutdown()
        cluster.shutdown()  # type: ignore[no-untyped-call]
        shutil.rmtree(folder, ignore_errors=True)
    load_after = os.getloadavg()[0]
    r = results["samples_per_s"]
    results["speedup_1_to_3"] = r[3] / r[1]
    results["load_average"] = [load_before, load_after]
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"Ray {ray.__version__}; {n} records of 1 KB, 64 per task; 1-minute load average "
        f"{load_before:.1f} before, {load_after:.1f} after (other work skews the figures)"
    )
    print()
    print("| worker nodes (1 CPU each) | samples/s | vs 1 node |")
    print("|---:|---:|---:|")
    for k in (1, 2, 3):
        print(f"| {k} | {r[k]:,.0f} | {r[k] / r[1]:.2f}x |")
    loss = results["node_loss"]
    print()
    print(
        f"node loss on 3 nodes: {loss['lost_s']:.1f} s of 2-node throughput lost in the {loss['window_s']:g} s after "
        f"the kill ({loss['deaths']} actor death(s), {loss['retries']} task(s) re-run, "
        f"{loss['replacements']} replacement(s))"
    )
    m = results["driver_rss_mib"]
    print(f"driver RSS: {m['start']:.0f} MiB at start, {m['peak']:.0f} MiB peak")


if __name__ == "__main__":
    main()
