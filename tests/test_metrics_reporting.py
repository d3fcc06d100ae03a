"""Metrics for dashboards: the callback and the ``zephon_metrics`` hook receive snapshots while the
pipeline runs, nothing runs without a listener, and a failing sink does not stop the pipeline.

The exporters built on them (flat scalars, Prometheus) are zephon-observe's and tested there."""

from __future__ import annotations

import json
import threading
import time
import warnings

import pytest

from tests import helpers
from zephon_core import ConfigError, Dataset, Pipeline, StaticMixtureWorkSource, hookimpl
from zephon_core.plugins import ZephonPluginManager


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
