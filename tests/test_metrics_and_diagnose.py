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


# -- reading metrics does not change what is seen -----------------------------------------------------


def _slow_middle() -> Pipeline:
    """A 2 ms-per-record map at parallelism 1 between two fast maps: the slow map is the bottleneck."""
    p = Pipeline(_source()).fetch(parallelism=1)
    p = p.map_transform(helpers.quick, parallelism=1, name="before")
    p = p.map_transform(helpers.sleepy, parallelism=1, name="slow")
    p = p.map_transform(helpers.quick, parallelism=1, name="after")
    return p.batch(8).options(lanes=2, runner="threads")


def _next_for(it, seconds: float) -> None:
    """A training loop that only takes batches, for ``seconds``."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        next(it)


@pytest.mark.parametrize("window_s", [10.0, 0.5])
def test_diagnose_right_after_metrics_still_names_the_slow_map(window_s):
    with _slow_middle() as p:
        it = iter(p)
        _next_for(it, 1.2)
        p.metrics(window_s)
        d = p.diagnose(window_s)
        again = p.diagnose(window_s)
    assert d.stage == "slow", str(d)
    assert again.stage == "slow", str(again)


def test_repeated_metrics_reads_agree_and_cover_the_window():
    with _slow_middle() as p:
        it = iter(p)
        _next_for(it, 1.2)
        windows = [p.metrics(window_s=0.5)["window"] for _ in range(5)]
    assert all(w["window_s"] >= 0.5 for w in windows), [w["window_s"] for w in windows]
    waits = [w["consumer"]["wait"] for w in windows]
    busy = [next(s["worker_busy"] for s in w["stages"] if s["name"] == "slow") for w in windows]
    assert max(waits) - min(waits) < 0.05 and min(waits) > 0.5, waits
    assert max(busy) - min(busy) < 0.05 and min(busy) > 0.8, busy


def test_metrics_read_in_the_loop_leave_diagnose_its_window():
    with _slow_middle() as p:
        it = iter(p)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 1.5:
            next(it)
            p.metrics(window_s=0.5)  # a dashboard reading every step
        m = p.metrics(window_s=0.5)
        d = p.diagnose(window_s=0.5)
    assert 0.5 <= m["window"]["window_s"] < 1.0, m["window"]["window_s"]
    assert d.stage == "slow", str(d)


def _snap(t: float, batches: int, wait_s: float) -> dict:
    stage = {"name": "s", "runner": "threads", "parallelism": 1, "has_worker": True}
    stage |= {k: 0 for k in ("records_in", "records_out", "tasks", "busy_s", "acc_busy_s")}
    stage |= {k: 0.0 for k in ("wait_input_s", "window_full_s", "blocked_output_s")}
    return {
        "elapsed_s": t,
        "stages": [stage],
        "consumer": {"batches": batches, "wait_s": wait_s},
        "source": {"chunks": 0},
    }


def test_a_window_starts_at_the_newest_snapshot_old_enough():
    import collections

    from zephon_core.errors import ConfigError
    from zephon_core.runtime.metrics import HISTORY_KEEP_S, window_over

    history: collections.deque = collections.deque()
    assert window_over(history, _snap(1.0, 10, 0.5), 2.0)["window_s"] == pytest.approx(1.0)  # since the start
    assert window_over(history, _snap(1.01, 10, 0.5), 2.0)["window_s"] == pytest.approx(1.01)  # not 0.01
    assert len(history) == 1  # reads closer than HISTORY_EVERY_S keep no new snapshot
    w = window_over(history, _snap(4.0, 40, 2.0), 2.0)
    assert w["window_s"] == pytest.approx(3.0) and w["consumer"]["wait"] == pytest.approx(0.5)
    w = window_over(history, _snap(4.5, 50, 2.0), 2.0)
    assert w["window_s"] == pytest.approx(3.5)  # the snapshot at 4.0 is not 2 s old yet
    window_over(history, _snap(HISTORY_KEEP_S + 10, 60, 3.0), 2.0)
    assert [h["elapsed_s"] for h in history] == [4.5, HISTORY_KEEP_S + 10]  # 4.5 can still start a window
    assert set(history[0]) == {"elapsed_s", "stages", "consumer", "source"}  # kept small
    for bad in (0, -1.0, float("nan"), float("inf"), "10", True):
        with pytest.raises(ConfigError, match="window_s must be a positive number"):
            window_over(history, _snap(100.0, 0, 0.0), bad)
