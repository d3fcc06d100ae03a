"""Registration, option resolution and the arguments of the lazy ``ray.init``."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from zephon_ray import RayRunner, configure, ray_runner_plugin
from zephon_ray import testing as ray_helpers
from zephon_ray.connect import init_kwargs
from zephon_ray.options import RayOptions, from_environment, resolve

from zephon_core import ConfigError, Pipeline
from zephon_core.plugins import ZephonPluginManager, default_plugin_manager


def test_registered_as_ray_runner_by_this_package():
    reg = default_plugin_manager().registry.get("runner", "ray")
    assert reg.package == "zephon-ray" and reg.factory == "zephon_ray.runner:RayRunner"
    assert isinstance(reg.load()(), RayRunner)
    Pipeline(ray_helpers.numbers()).batch(4).options(runner="ray")  # accepted, nothing started
    Pipeline(ray_helpers.numbers()).map_transform(ray_helpers.double, runner="ray").batch(4)


def test_importing_the_plugin_does_not_import_ray():
    code = (
        "import sys; from zephon_core.plugins import default_plugin_manager; "
        "import zephon_ray; pm = default_plugin_manager(); pm.registry.get('runner', 'ray'); "
        "print('ray' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "False"


def test_environment_options_are_parsed():
    env = {
        "ZEPHON_RAY_ADDRESS": "ray://head:10001",
        "ZEPHON_RAY_NUM_CPUS": "8",
        "ZEPHON_RAY_ACTOR_OPTIONS": '{"num_cpus": 1, "resources": {"tokenizer": 1}}',
        "ZEPHON_RAY_RUNTIME_ENV": '{"pip": ["zephon-core", "zephon-ray"]}',
        "ZEPHON_RAY_START_TIMEOUT": "30",
    }
    opts = from_environment(env)
    assert opts == {
        "address": "ray://head:10001",
        "num_cpus": 8,
        "actor_options": {"num_cpus": 1, "resources": {"tokenizer": 1}},
        "runtime_env": {"pip": ["zephon-core", "zephon-ray"]},
        "start_timeout": 30.0,
    }
    with pytest.raises(ConfigError, match="ZEPHON_RAY_ACTOR_OPTIONS"):
        from_environment({"ZEPHON_RAY_ACTOR_OPTIONS": "{num_cpus: 1}"})


def test_code_wins_over_environment(monkeypatch, ray_options):
    monkeypatch.setenv("ZEPHON_RAY_ADDRESS", "auto")
    monkeypatch.setenv("ZEPHON_RAY_NUM_CPUS", "3")
    assert resolve({}).address == "auto"
    configure(address="ray://head:10001")
    assert resolve({}).address == "ray://head:10001" and resolve({}).num_cpus == 3
    assert RayRunner(address="head:6379").options.address == "head:6379"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"adress": "auto"}, r"unknown option\(s\) \['adress'\]"),
        ({"num_cpus": 0}, "num_cpus must be an int >= 1"),
        ({"actor_options": ["num_cpus", 1]}, "actor_options must be a dict"),
        ({"actor_options": {"max_concurrency": 4}}, "may not set max_concurrency"),
        ({"start_timeout": 0}, "start_timeout must be a positive number"),
        ({"placement": "scatter"}, r"placement must be one of \['pack', 'spread'\] or None, got 'scatter'"),
        (
            {"placement": "spread", "actor_options": {"scheduling_strategy": "DEFAULT"}},
            r"either placement or actor_options\['scheduling_strategy'\]",
        ),
        ({"max_task_crashes": 0}, "max_task_crashes must be an int >= 1, got 0"),
        ({"max_parallelism": True}, "max_parallelism must be an int >= 1, got True"),
    ],
)
def test_bad_options_fail_early(options, message, ray_options):
    with pytest.raises(ConfigError, match=message):
        configure(**options)
    with pytest.raises(ConfigError, match=message):
        ray_runner_plugin("ray_bad", **options)


def test_init_arguments_for_local_cluster_and_client():
    local = init_kwargs(RayOptions(num_cpus=3), environ={})
    assert local == {"ignore_reinit_error": True, "num_cpus": 3, "include_dashboard": False}
    cluster = init_kwargs(RayOptions(address="auto", num_cpus=3, runtime_env={"pip": ["zephon-ray"]}), environ={})
    assert cluster == {"ignore_reinit_error": True, "address": "auto", "runtime_env": {"pip": ["zephon-ray"]}}
    client = init_kwargs(RayOptions(address="ray://head:10001", namespace="train"), environ={})
    assert client == {"address": "ray://head:10001", "namespace": "train"}
    via_ray_address = init_kwargs(RayOptions(), environ={"RAY_ADDRESS": "head:6379"})
    assert "num_cpus" not in via_ray_address and "include_dashboard" not in via_ray_address
    extra = init_kwargs(RayOptions(init_kwargs={"_temp_dir": "/tmp/x", "include_dashboard": True}), environ={})
    assert extra["_temp_dir"] == "/tmp/x" and extra["include_dashboard"] is True


@pytest.mark.usefixtures("ray_session")
def test_named_runner_plugin_applies_actor_options():
    pm = ZephonPluginManager(plugins=[ray_runner_plugin("ray_one_cpu", actor_options={"num_cpus": 1})])
    assert "ray_one_cpu" in pm.registry.names("runner")
    p = (
        Pipeline(ray_helpers.numbers(32), plugins=pm)
        .map_transform(ray_helpers.assigned_cpus, runner="ray_one_cpu")
        .batch(8)
        .options(runner="threads")
    )
    with p:
        cpus = {float(c) for b in p for c in b.data["cpus"]}
    assert cpus == {1.0}, "actor_options must reach ActorClass.options()"
    assert json.loads(json.dumps(pm.listing()))  # the plugin lists like any other


def test_placement_becomes_a_ray_scheduling_strategy_and_reads_from_the_environment(ray_options):
    assert RayOptions(placement="spread").scheduling_options == {"scheduling_strategy": "SPREAD"}
    assert RayOptions(placement="pack", actor_options={"num_cpus": 1}).scheduling_options == {
        "num_cpus": 1,
        "scheduling_strategy": "DEFAULT",
    }
    assert RayOptions(actor_options={"num_gpus": 1}).scheduling_options == {"num_gpus": 1}
    env = {"ZEPHON_RAY_PLACEMENT": "spread", "ZEPHON_RAY_MAX_TASK_CRASHES": "3", "ZEPHON_RAY_MAX_PARALLELISM": "8"}
    assert from_environment(env) == {"placement": "spread", "max_task_crashes": 3, "max_parallelism": 8}


def test_death_reasons_tell_a_lost_node_from_a_killed_process():
    from ray.exceptions import ActorDiedError, ObjectLostError, OutOfMemoryError, RayActorError
    from zephon_ray.executor import death_reason

    assert death_reason(ActorDiedError()) == "process died"
    assert death_reason(RayActorError(preempted=True)) == "node preempted"
    assert death_reason(RayActorError(error_msg="The actor died because its node has died. Node Id: ab")) == "node lost"
    assert death_reason(ObjectLostError("00" * 28, "", "")) == "node lost"
    assert death_reason(OutOfMemoryError("Task was killed due to the node running low on memory.")) == "out of memory"
    # Ray's generic advice mentions the OOM killer: that alone is not an out-of-memory death
    assert death_reason(RayActorError(error_msg="worker exited; (1) the OOM killer due to high memory usage")) == (
        "process died"
    )
