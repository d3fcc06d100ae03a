"""Metrics for dashboards: the callback and the zephon_metrics hook receive snapshots while the pipeline
runs, a failing sink does not stop it, the Prometheus endpoint answers a scrape over loopback, and
the documentation's logger examples run as written."""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.request
import warnings
from pathlib import Path

import pytest

from tests import helpers
from zephon_core import ConfigError, Dataset, Pipeline, StaticMixtureWorkSource, hookimpl
from zephon_core.export import flatten
from zephon_core.plugins import ZephonPluginManager

ROOT = Path(__file__).resolve().parents[1]


def _pipeline(plugins: ZephonPluginManager | None = None, n: int = 4000) -> Pipeline:
    ds = Dataset.from_records("d", [{"i": i} for i in range(n)], shard_size=250)
    p = Pipeline(StaticMixtureWorkSource([ds], chunk_size=32, seed=1), plugins=plugins)
    return p.map_transform(helpers.quick, name="ident").batch(8).options(lanes=2)


def _consume(p: Pipeline, seconds: float) -> None:
    t0 = time.monotonic()
    for _ in p:
        time.sleep(0.002)  # a training step: the run lasts long enough for several reports
        if time.monotonic() - t0 > seconds:
            break


def test_callback_receives_snapshots_while_running_and_a_final_one():
    got: list[dict] = []
    threads: set[str] = set()

    def sink(snap: dict) -> None:
        threads.add(threading.current_thread().name)
        got.append(snap)

    with _pipeline().options(metrics_callback=sink, metrics_every_s=0.1) as p:
        _consume(p, 0.8)
        during = len(got)
    assert during >= 4, during
    json.dumps(got)
    assert threads == {"zephon-metrics-reporter"}  # never the training loop's thread
    last = got[-1]
    assert last["final"] is True and all(s["final"] is False for s in got[:-1])
    assert last["rank"] == 0 and last["world_size"] == 1
    assert [s["name"] for s in last["stages"]] == ["fetch", "ident", "batch"]
    assert sum(s["window"]["consumer"]["batches_per_s"] * s["window"]["window_s"] for s in got) == pytest.approx(
        last["consumer"]["batches"], rel=0.01
    )  # consecutive windows tile the run
    assert all(0.05 < s["window"]["window_s"] < 0.5 for s in got[1:-1])


class _Listener:
    def __init__(self) -> None:
        self.snapshots: list[dict] = []

    @hookimpl
    def zephon_metrics(self, snapshot: dict) -> None:
        self.snapshots.append(snapshot)


def test_a_plugin_implementing_the_hook_receives_snapshots():
    listener = _Listener()
    pm = ZephonPluginManager(load_entrypoints=False, plugins=[listener])
    with _pipeline(pm).options(metrics_every_s=0.1) as p:
        _consume(p, 0.5)
    assert len(listener.snapshots) >= 3
    assert listener.snapshots[-1]["final"] is True


def test_nothing_runs_without_a_listener():
    with _pipeline(ZephonPluginManager(load_entrypoints=False)) as p:
        next(iter(p))
        assert p._reporter is None
        assert "zephon-metrics-reporter" not in {t.name for t in threading.enumerate()}


def test_a_failing_sink_warns_once_and_the_pipeline_goes_on():
    calls = []

    def broken(snap: dict) -> None:
        calls.append(1)
        raise RuntimeError("dashboard is down")

    with _pipeline() as p:
        expected = sum(1 for _ in p)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with _pipeline().options(metrics_callback=broken, metrics_every_s=0.05) as p:
            n = 0
            for _ in p:
                n += 1
                time.sleep(0.001)
    assert n == expected and len(calls) >= 2
    msgs = [str(w.message) for w in caught if "dashboard is down" in str(w.message)]
    assert len(msgs) == 1 and "goes on" in msgs[0]


def test_bad_options_fail_when_set():
    with pytest.raises(ConfigError, match="metrics_callback must be callable"):
        _pipeline().options(metrics_callback=3)
    with pytest.raises(ConfigError, match="metrics_every_s"):
        _pipeline().options(metrics_every_s=0)


def test_flatten_gives_scalars_per_step():
    with _pipeline() as p:
        _consume(p, 0.3)
        flat = flatten(p.metrics(window_s=1.0))
    assert flat["zephon/ident/records_out_per_s"] > 0
    assert {"zephon/ident/worker_busy", "zephon/ident/latency_p99_ms", "zephon/consumer/wait"} <= set(flat)
    assert all(isinstance(v, float) for v in flat.values())


def _scrape(url: str) -> dict[tuple[str, frozenset], float]:
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    out = {}
    for line in text.splitlines():
        m = re.match(r"^(\w+)\{(.*)\} (\S+)$", line)
        if m:
            labels = frozenset(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
            out[(m.group(1), labels)] = float(m.group(3))
    return out


def test_prometheus_endpoint_serves_counters_per_stage_over_loopback():
    from zephon_core.export.prometheus import serve

    p = _pipeline()
    with serve(p, port=0) as server:
        assert server.url.startswith("http://127.0.0.1:")
        assert not any(k[0].startswith("zephon_stage") for k in _scrape(server.url))  # not started: no stages
        with p:
            it = iter(p)
            for _ in range(100):
                next(it)
            first = _scrape(server.url)
            for _ in range(100):
                next(it)
            second = _scrape(server.url)
    ident = frozenset({("stage", "ident"), ("rank", "0")})
    assert first[("zephon_stage_records_out_total", ident)] >= 800
    assert second[("zephon_stage_records_out_total", ident)] > first[("zephon_stage_records_out_total", ident)]
    assert second[("zephon_consumer_batches_total", frozenset({("rank", "0")}))] == 200
    assert ("zephon_stage_queue_fill", ident) in second and ("zephon_stage_worker_busy_ratio", ident) in second
    assert ("zephon_stage_task_latency_seconds", ident | {("quantile", "0.99")}) in second


def test_the_collector_does_not_keep_a_pipeline_alive():
    import gc
    import weakref

    from zephon_core.export.prometheus import collector

    p = _pipeline()
    c = collector(p)
    ref = weakref.ref(p)
    del p
    gc.collect()
    assert ref() is None and list(c.collect()) == []


def _doc_blocks(page: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", (ROOT / "docs" / page).read_text(), flags=re.S)


def test_the_tuning_docs_logger_examples_run_with_stand_in_loggers():
    """The TensorBoard and W&B examples call a user's logger; here the loggers are stand-ins."""
    blocks = [b for b in _doc_blocks("tuning.md") if "metrics_callback" in b]
    assert len(blocks) >= 2
    scalars: list[tuple[str, float, int]] = []
    logged: list[dict] = []

    class SummaryWriter:
        def add_scalar(self, tag: str, value: float, step: int) -> None:
            scalars.append((tag, value, step))

    class Wandb:
        def log(self, data: dict, commit: bool = True) -> None:
            assert commit is False  # the example attaches figures to the trainer's next step
            logged.append(data)

    for block in blocks:
        pipeline = _pipeline()
        env = {"pipeline": pipeline, "writer": SummaryWriter(), "wandb": Wandb()}
        exec(block, env)
        with env["pipeline"] as p:  # the example configured it; run it briefly (the final report comes at close)
            _consume(p, 1.0)
    assert any(tag == "zephon/ident/worker_busy" for tag, _, _ in scalars)
    assert logged and "zephon/consumer/wait" in logged[-1]


def test_the_kernel_imports_no_plotting_export_or_parquet_library():
    import subprocess
    import sys

    code = (
        "import sys, json, zephon_core as z; ds = z.Dataset.from_records('a', [{'i': i} for i in range(64)]);"
        "p = z.Pipeline(z.StaticMixtureWorkSource([ds])).batch(4).options(metrics_callback=print, metrics_every_s=60);"
        "next(iter(p)); p.close(); import zephon_core.export;"
        "print(json.dumps(sorted(m for m in ('matplotlib', 'prometheus_client', 'pyarrow', 'tqdm') if m in sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
