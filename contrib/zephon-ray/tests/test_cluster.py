"""Lazy start-up and connecting to an existing cluster, each in a fresh interpreter.

The session's shared Ray instance cannot show either: there Ray is already initialised. Here a
*head* interpreter runs a pipeline with ``runner="ray"`` and no ``ray.init`` of its own, so the
runner starts a local instance from ``ZEPHON_RAY_*`` settings; a second interpreter then joins that
instance through ``ZEPHON_RAY_ADDRESS`` (as a training job joins a real cluster) and places its
actors with a custom resource that only the head offers.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

HEAD = """
import json, sys
import ray
from zephon_core.conformance.harness import run_global
from zephon_core.demo import build, make_source
src = make_source(chunk_size=64)
ray_hashes = run_global(lambda p: build(p, source=src), lanes=2, runner="ray", parallelism=1).hashes
threads = run_global(lambda p: build(p, source=src), lanes=2, runner="threads", parallelism=1).hashes
ctx = ray.get_runtime_context()
print(json.dumps({"gcs": ctx.gcs_address, "cpus": ray.cluster_resources().get("CPU"),
                  "same": ray_hashes == threads, "steps": len(ray_hashes)}), flush=True)
sys.stdin.read()  # keep the instance up until the test closes stdin
"""

JOIN = """
import json
import ray
from zephon_core.conformance.harness import run_global
from zephon_core.demo import build, make_source
src = make_source(chunk_size=64)
hashes = run_global(lambda p: build(p, source=src), lanes=2, world_size=2, runner="ray", parallelism=1).hashes
threads = run_global(lambda p: build(p, source=src), lanes=2, runner="threads", parallelism=1).hashes
print(json.dumps({"gcs": ray.get_runtime_context().gcs_address, "same": hashes == threads}), flush=True)
"""


@pytest.mark.slow
def test_lazy_local_start_then_join_it_by_address():
    base = tempfile.gettempdir() if len(tempfile.gettempdir()) <= 40 else "/tmp"
    folder = tempfile.mkdtemp(prefix="zrayc-", dir=base)
    env = dict(os.environ, TMPDIR=folder, RAY_TMPDIR=folder)
    for k in [k for k in env if k.startswith("ZEPHON_RAY_") or k == "RAY_ADDRESS"]:
        del env[k]
    head_env = dict(
        env,
        ZEPHON_RAY_NUM_CPUS="1",
        ZEPHON_RAY_INIT_KWARGS=json.dumps({"_temp_dir": folder, "resources": {"zephon_head": 8}}),
    )
    head = subprocess.Popen(
        [sys.executable, "-c", HEAD],
        env=head_env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert head.stdout is not None
        line = head.stdout.readline()
        assert line, f"the head interpreter failed (exit code {head.poll()})"
        started = json.loads(line)
        assert started["cpus"] == 1.0, "ZEPHON_RAY_NUM_CPUS must reach the lazily started instance"
        assert started["same"] and started["steps"] > 10
        assert started["gcs"].startswith("127.0.0.1:")
        join_env = dict(
            env,
            ZEPHON_RAY_ADDRESS=started["gcs"],
            # a custom resource alone would also reserve 1 CPU per actor for its lifetime; say 0
            ZEPHON_RAY_ACTOR_OPTIONS=json.dumps({"num_cpus": 0, "resources": {"zephon_head": 1}}),
            ZEPHON_RAY_START_TIMEOUT="60",
        )
        out = subprocess.run(
            [sys.executable, "-c", JOIN], env=join_env, capture_output=True, text=True, timeout=300, check=False
        )
        assert out.returncode == 0, out.stderr[-3000:]
        joined = json.loads(out.stdout.strip().splitlines()[-1])
        assert joined == {"gcs": started["gcs"], "same": True}
    finally:
        if head.stdin is not None:
            head.stdin.close()
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            head.kill()
            head.wait(timeout=10)
        shutil.rmtree(folder, ignore_errors=True)
    assert not Path(folder).exists()
