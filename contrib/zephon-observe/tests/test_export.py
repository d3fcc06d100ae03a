"""Metrics export for dashboards: flat scalars for loggers, the Prometheus endpoint answers a scrape over
loopback, and the documentation's logger examples run as written. (The metrics callback and the
``zephon_metrics`` hook that feed them are the kernel's, tested in its tests/test_metrics_reporting.py.)"""

from __future__ import annotations

import json
import re
import time
import urllib.request
from pathlib import Path
from typing import Any

from zephon_observe.export import flatten

from zephon_core import Dataset, Pipeline, StaticMixtureWorkSource
from zephon_core.plugins import ZephonPluginManager

ROOT = Path(__file__).resolve().parents[3]  # the repository (the docs are at its top)


def _ident(payload: dict[str, Any]) -> dict[str, Any]:
    return payload


def _pipeline(plugins: ZephonPluginManager | None = None, n: int = 4000) -> Pipeline:
    ds = Dataset.from_records("d", [{"i": i} for i in range(n)], shard_size=250)
    p = Pipeline(StaticMixtureWorkSource([ds], chunk_size=32, seed=1), plugins=plugins)
    return p.map_transform(_ident, name="ident").batch(8).options(lanes=2)


def _consume(p: Pipeline, seconds: float) -> None:
    t0 = time.monotonic()
    for _ in p:
        time.sleep(0.002)  # a training step: the run lasts long enough for several reports
        if time.monotonic() - t0 > seconds:
            break


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
    from zephon_observe.export.prometheus import serve

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

    from zephon_observe.export.prometheus import collector

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


def test_a_pipeline_and_the_export_module_import_no_plotting_export_or_parquet_library():
    import subprocess
    import sys

    code = (
        "import sys, json, zephon_core as z; ds = z.Dataset.from_records('a', [{'i': i} for i in range(64)]);"
        "p = z.Pipeline(z.StaticMixtureWorkSource([ds])).batch(4).options(metrics_callback=print, metrics_every_s=60);"
        "next(iter(p)); p.close(); import zephon_observe.export;"
        "print(json.dumps(sorted(m for m in ('matplotlib', 'prometheus_client', 'pyarrow', 'tqdm') if m in sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
