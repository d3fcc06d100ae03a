"""Live metrics per step, and the bottleneck named correctly wherever a deliberately slow step sits."""

from __future__ import annotations

import json
import time

import pytest

from tests import helpers
from zephon_core import Dataset, Pipeline, StaticMixtureWorkSource, ZephonError

N = 20_000


def _source(slow_reader: bool = False) -> StaticMixtureWorkSource:
    ds = (
        Dataset("d", helpers.SlowReader.make(N))
        if slow_reader
        else Dataset.from_records("d", [{"i": i} for i in range(N)], shard_size=500)
    )
    return StaticMixtureWorkSource([ds], chunk_size=32, seed=1)


def _pipeline(slow: str) -> Pipeline:
    p = Pipeline(_source(slow_reader=slow == "fetch")).fetch(parallelism=1)
    p = p.map_transform(helpers.sleepy if slow == "first" else helpers.quick, parallelism=1, name="first")
    p = p.map_transform(helpers.sleepy if slow == "second" else helpers.quick, parallelism=1, name="second")
    if slow == "packer":
        p = p.stateful_transform("packer", init_state=dict, push=helpers.slow_push)
    collate = helpers.sleepy_collate if slow == "batch" else None
    return p.batch(8, collate=collate).options(lanes=2, runner="threads")


def _run(p: Pipeline, seconds: float, consumer_sleep: float = 0.0) -> None:
    t0 = time.monotonic()
    for _ in p:
        if consumer_sleep:
            time.sleep(consumer_sleep)
        if time.monotonic() - t0 > seconds:
            break


@pytest.mark.parametrize(
    ("slow", "culprit"),
    [("fetch", "fetch"), ("first", "first"), ("second", "second"), ("packer", "packer"), ("batch", "batch")],
)
def test_the_slow_step_is_named(slow, culprit):
    with _pipeline(slow) as p:
        _run(p, 2.5)
        d = p.diagnose(window_s=1.5)
    assert d.stage == culprit, str(d)
    assert culprit in str(d) and "→" in str(d)
    if slow == "packer":
        assert "accumulator" in d.reason
    elif slow == "fetch":
        assert "fetch(parallelism" in d.suggestion
    else:
        assert "parallelism" in d.suggestion


def test_a_slow_consumer_is_named():
    with _pipeline("none") as p:
        _run(p, 2.5, consumer_sleep=0.02)
        d = p.diagnose(window_s=1.5)
    assert d.stage == "consumer", str(d)


def test_metrics_snapshot_is_json_and_counts_records():
    with _pipeline("none") as p:
        it = iter(p)
        for _ in range(50):
            next(it)
        m = p.metrics()
    json.dumps(m)
    names = [s["name"] for s in m["stages"]]
    assert names == ["fetch", "first", "second", "batch"]
    first = m["stages"][1]
    assert first["records_in"] >= 400 and first["records_out"] >= 400 and first["tasks"] > 0
    assert first["bytes_in"] > 0 and set(first["latency_ms"]) == {"p50", "p90", "p99"}
    assert m["consumer"]["batches"] == 50 and m["source"]["chunks"] > 0
    w = m["window"]
    assert 0 <= w["stages"][1]["worker_busy"] <= 1 and w["consumer"]["batches_per_s"] > 0


def test_diagnose_needs_a_running_pipeline():
    with pytest.raises(ZephonError, match="iterate it first"):
        _pipeline("none").diagnose()


def test_a_trace_of_worker_tasks_is_valid_chrome_trace_json():
    p = _pipeline("none").options(trace=True)
    with p:
        it = iter(p)
        for _ in range(40):
            next(it)
        trace = json.loads(json.dumps(p.trace()))
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert {e["name"] for e in spans} >= {"fetch", "first", "second", "batch"}
    assert all(e["dur"] >= 0 and e["ts"] > 0 for e in spans)
    assert any(e["ph"] == "M" for e in trace["traceEvents"])


@pytest.mark.parametrize(
    ("runner", "says", "never"),
    [
        ("processes", "raise its parallelism (now 1 on processes)", "use the processes runner"),
        ("threads", "use the processes runner if it holds the GIL", "now 1 on processes"),
        ("inline", "run it on the threads or processes runner", "now 1"),
    ],
)
def test_the_suggestion_follows_the_runner_the_step_is_on(runner, says, never):
    from zephon_core.runtime.diagnose import diagnose

    stage = {
        "name": "decode",
        "runner": runner,
        "parallelism": 1,
        "worker_busy": 0.97,
        "accumulator_busy": 0.01,
        "input_wait": 0.0,
    }
    after = {**stage, "name": "batch", "worker_busy": 0.1, "input_wait": 0.8}
    d = diagnose({"stages": [stage, after], "consumer": {"wait": 0.8, "batches_per_s": 10.0}})
    assert d.stage == "decode" and says in d.suggestion and never not in d.suggestion, d.suggestion
