"""Clear errors for bad options and failing workers, and clean shutdown."""

from __future__ import annotations

import multiprocessing
import threading
import time

import pytest

from tests import helpers
from zephon_core import (
    CheckpointError,
    ConfigError,
    Dataset,
    OperatorError,
    Pipeline,
    PluginError,
    ReaderError,
    StaticMixtureWorkSource,
    WorkerCrashedError,
)
from zephon_core.plugins import ZephonPluginManager


def _source(n: int = 400) -> StaticMixtureWorkSource:
    ds = Dataset.from_records("nums", [{"i": i} for i in range(n)], shard_size=50)
    return StaticMixtureWorkSource([ds], chunk_size=16, seed=0, shuffle=False)


@pytest.mark.parametrize(
    ("opts", "message"),
    [
        ({"lanes": 4, "dp_world_size": 3}, "lanes=4 cannot be split evenly over dp_world_size=3"),
        ({"lanes": 4, "dp_world_size": 2, "dp_rank": 2}, "dp_rank=2 is out of range"),
        ({"lanes": 0}, "lanes must be an int >= 1"),
        ({"flush_every_k_chunks": -1}, "flush_every_k_chunks"),
        ({"lane": 4}, "unknown option"),
    ],
)
def test_bad_options_fail_when_built(opts, message):
    with pytest.raises(ConfigError, match=message):
        Pipeline(_source()).batch(4).options(**opts)


def test_unknown_runner_lists_installed():
    with pytest.raises(PluginError, match=r"no runner named 'gpu'.*installed: .*inline.*processes.*threads"):
        Pipeline(_source()).batch(4).options(runner="gpu")
    bare = ZephonPluginManager(load_entrypoints=False)  # as if zephon-ray were not installed
    with pytest.raises(PluginError, match="pip install zephon-ray"):
        Pipeline(_source(), plugins=bare).batch(4).options(runner="ray")


def test_pipeline_must_end_with_batch():
    with pytest.raises(ConfigError, match="must end with .batch"):
        iter(Pipeline(_source()).shuffle(8))
    with pytest.raises(ConfigError, match="after batch"):
        Pipeline(_source()).batch(4).shuffle(8)


def test_missing_operator_plugin_names_the_package():
    pm = ZephonPluginManager(load_entrypoints=False)
    p = Pipeline(_source(), plugins=pm)
    with pytest.raises(AttributeError, match="pip install zephon-tokenize"):
        p.tokenize(tokenizer_id="gpt2")
    with pytest.raises(AttributeError, match="no method 'frobnicate'"):
        p.frobnicate()


@pytest.mark.parametrize("runner", ["inline", "threads", "processes"])
def test_worker_exception_names_operator_and_sample(runner):
    p = Pipeline(_source()).map_transform(helpers.fail_on_seven, parallelism=2).batch(4).options(runner=runner)
    t0 = time.monotonic()
    with p, pytest.raises(OperatorError) as info:
        list(p)
    msg = str(info.value)
    assert "operator 'fail_on_seven'" in msg and "seven is not allowed" in msg
    assert "nums[shard 0 (memory-00000), index 7]" in msg
    assert time.monotonic() - t0 < 30


def test_crashed_process_worker_surfaces_within_seconds():
    p = Pipeline(_source()).map_transform(helpers.die_on_seven, parallelism=2).batch(4).options(runner="processes")
    with p:
        t0 = time.monotonic()
        with pytest.raises(WorkerCrashedError, match=r"worker process of operator 'fetch\+die_on_seven' died"):
            list(p)
        assert time.monotonic() - t0 < 10


def test_unpicklable_worker_is_a_clear_error():
    p = Pipeline(_source()).map_transform(lambda x: x).batch(4).options(runner="processes")
    with pytest.raises(ConfigError, match="operator 'map_transform'.*cannot be pickled.*runner='threads'"):
        iter(p)
    p.close()


def test_bad_worker_output_is_a_clear_error():
    p = Pipeline(_source()).map_transform(helpers.returns_list).batch(4).options(runner="threads")
    with p, pytest.raises(OperatorError, match="worker output must be a dict, got list"):
        list(p)


@pytest.mark.parametrize("runner", ["threads", "processes"])
def test_close_leaves_nothing_behind(runner):
    threads_before = {t.ident for t in threading.enumerate()}
    shm_before = helpers.shm_entries()
    p = (
        Pipeline(_source(4000))
        .map_transform(helpers.slow_identity, parallelism=3)
        .shuffle(32)
        .batch(4, parallelism=2)
        .options(runner=runner, lanes=2)
    )
    with p:
        for i, _ in enumerate(p):
            if i == 5:
                break  # stop mid-stream with work in flight
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        extra = [t for t in threading.enumerate() if t.ident not in threads_before]
        if not extra and not multiprocessing.active_children():
            break
        time.sleep(0.05)
    assert not [t.name for t in threading.enumerate() if t.ident not in threads_before]
    assert not multiprocessing.active_children()
    assert helpers.shm_entries() <= shm_before


def test_checkpoint_into_different_pipeline_says_what_differs():
    with Pipeline(_source()).shuffle(8, seed=1).batch(4).options(lanes=2) as p:
        next(iter(p))
        state = p.state_dict()
    other = Pipeline(_source()).shuffle(8, seed=2).batch(4).options(lanes=2)
    with pytest.raises(CheckpointError, match=r"operators\[1\]\.config\.seed: 1 in checkpoint, 2 now"):
        other.load_state_dict(state)
    with pytest.raises(CheckpointError, match="lanes: 2 in checkpoint, 4 now"):
        Pipeline(_source()).shuffle(8, seed=1).batch(4).options(lanes=4).load_state_dict(state)
    ds = Dataset.from_records("other", [{"i": i} for i in range(400)], shard_size=50)
    ws = StaticMixtureWorkSource([ds], chunk_size=16, seed=0, shuffle=False)
    with pytest.raises(CheckpointError, match="source.datasets"):
        Pipeline(ws).shuffle(8, seed=1).batch(4).options(lanes=2).load_state_dict(state)


def test_checkpoint_missing_lanes_and_malformed():
    with Pipeline(_source()).batch(4).options(lanes=4, dp_world_size=2, dp_rank=0) as p:
        it = iter(p)
        next(it), next(it)  # one whole round of this rank's two lanes
        state = p.state_dict()
    single = Pipeline(_source()).batch(4).options(lanes=4)
    with pytest.raises(CheckpointError, match=r"no state for lanes \[2, 3\].*merge_checkpoints"):
        single.load_state_dict(state)
    with pytest.raises(CheckpointError, match="not a zephon checkpoint"):
        single.load_state_dict({"lanes": {}})
    bad = dict(state, lanes={"0": {"window": -1, "skip": 0, "delivered": 0}})
    with pytest.raises(CheckpointError, match="'window' must be a non-negative int"):
        single.load_state_dict(bad)
    with pytest.raises(CheckpointError, match="before iterating"):
        p2 = Pipeline(_source()).batch(4).options(lanes=4, dp_world_size=2)
        iter(p2)
        p2.load_state_dict(state)
    p2.close()


def test_a_fetch_error_names_samples_of_the_failing_shard_only():
    ds = Dataset("broken", helpers.FailingShardReader.make())
    ws = StaticMixtureWorkSource([ds], chunk_size=20, shuffle=False)  # chunk 0 spans shards 0 and 1
    with Pipeline(ws).batch(4).options(runner="threads") as p, pytest.raises(OperatorError) as err:
        list(p)
    assert isinstance(err.value.__cause__, ReaderError)
    msg = str(err.value)
    assert "shard 1 (memory-00001): OSError: disk says no" in msg
    assert "samples broken[shard 1 (memory-00001), index 0]" in msg, msg
    assert "shard 0 (memory-00000)" not in msg
