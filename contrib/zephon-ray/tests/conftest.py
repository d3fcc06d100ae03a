"""One local Ray instance for the whole test session: loopback only, files under a temp folder.

Ray start-up takes several seconds, so every test shares this instance; the runner finds Ray
initialised and uses it (its lazy ``ray.init`` path is tested in a fresh interpreter instead).
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# Must be set before Ray is imported. Ray advertises the host's routable address unless it is told
# that clusters are off (the flag is named after macOS/Windows, where that is the default); with it,
# every Ray address is 127.0.0.1. Token auth would write ~/.ray/auth_token, outside the temp folder;
# usage stats would try the network.
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

from zephon_ray import testing as ray_helpers

_HERE = Path(__file__).resolve().parent


def _short_temp_root() -> str:
    """A temp folder short enough for Ray's Unix socket paths (at most 107 bytes in all)."""
    base = tempfile.gettempdir()
    return base if len(base) <= 40 else "/tmp"


_state: dict[str, Any] = {}


def _start() -> Any:
    """Start the shared instance unless it runs; idempotent."""
    import ray
    from ray import cloudpickle

    if _state:
        return ray
    cloudpickle.register_pickle_by_value(ray_helpers)
    folder = tempfile.mkdtemp(prefix="zray-", dir=_short_temp_root())
    _state.update(
        folder=folder,
        env={k: os.environ.get(k) for k in ("TMPDIR", "RAY_TMPDIR")},
        sigterm=signal.getsignal(signal.SIGTERM),  # ray.init installs its own handler
    )
    os.environ["TMPDIR"] = os.environ["RAY_TMPDIR"] = folder  # inherited by raylet and workers
    if ray.is_initialized():
        ray.shutdown()
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        _temp_dir=folder,
        object_store_memory=256 * 1024**2,
        ignore_reinit_error=True,
    )
    return ray


def _stop() -> None:
    """Shut Ray down and put back what starting it changed."""
    if not _state:
        return
    import ray
    from ray import cloudpickle

    ray.shutdown()
    for k, v in _state["env"].items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    signal.signal(signal.SIGTERM, _state["sigterm"])
    shutil.rmtree(_state["folder"], ignore_errors=True)
    cloudpickle.unregister_pickle_by_value(ray_helpers)
    _state.clear()


@pytest.fixture(scope="session")
def ray_session() -> Iterator[Any]:
    """A local Ray instance with 2 CPUs whose sockets, logs and spill files live in a temp folder."""
    yield _start()
    _stop()


def pytest_runtest_setup(item: pytest.Item) -> None:
    # Started again if a test of this folder runs after another package's (e.g. under reordering).
    if "ray_session" in getattr(item, "fixturenames", ()):
        _start()


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    # In a whole-repository run, stop Ray after this folder's last test rather than at the end of
    # the session, so the packages tested after this one never share a process with a live Ray.
    if nextitem is None or _HERE not in Path(str(nextitem.path)).parents:
        _stop()


class LocalCluster:
    """A Ray cluster of several raylets on this machine (``ray.cluster_utils.Cluster``), driver connected.

    The head has 1 CPU and no ``heavy`` resource, so an operator asking for ``{"heavy": 1}`` runs only
    on the worker nodes; each worker node has 1 CPU and ``heavy: 1`` (one heavy actor per node).
    Health checks run every second with a 2 s timeout, five failures in a row declaring a node dead:
    a killed raylet (its port refuses at once) in about 5 s, a frozen one (no answer until the
    timeout) in about 15 s. Ray's defaults (3 s, 10 s, 5) take about 15 s and 65 s; much less than
    this makes a raylet that is merely slow on a loaded machine look dead.
    """

    def __init__(self, folder: str) -> None:
        from ray.cluster_utils import Cluster

        self.folder = folder
        # The head is added as a node (not by the constructor), so a head that fails to start
        # still leaves a Cluster whose shutdown() stops what did start.
        self.cluster = Cluster(initialize_head=False, shutdown_at_exit=True)
        self.workers: list[Any] = []

    def start_head(self) -> None:
        """Start the head raylet (and GCS): 1 CPU, no ``heavy`` resource, faster health checks."""
        self.cluster.add_node(
            num_cpus=1,
            temp_dir=self.folder,
            include_dashboard=False,
            object_store_memory=80 * 1024**2,
            _system_config={
                "health_check_period_ms": 1000,
                "health_check_timeout_ms": 2000,  # Ray's 10 s would make a vanished node take ~55 s
                "health_check_failure_threshold": 5,
                "health_check_initial_delay_ms": 0,
            },
        )

    def add_worker(self) -> Any:
        """Start one more worker raylet (1 CPU, ``heavy: 1``) and wait until the cluster sees it."""
        node = self.cluster.add_node(
            num_cpus=1, resources={"heavy": 1}, object_store_memory=80 * 1024**2, include_dashboard=False
        )
        self.workers.append(node)
        self.cluster.wait_for_nodes(timeout=60)
        return node

    def remove_worker(self, node: Any) -> None:
        """Kill a worker raylet and everything on it, as a lost or preempted machine."""
        self.workers.remove(node)
        self.cluster.remove_node(node, allow_graceful=False)

    def freeze_worker(self, node: Any) -> list[Any]:
        """Stop (SIGSTOP) every process of a worker node, raylet first, as a machine that vanished.

        Nothing closes its connections, so only Ray's health check can tell it is gone. Returns the
        stopped processes for :meth:`bury_worker`.
        """
        import psutil  # type: ignore[import-untyped]

        procs: list[Any] = []
        for infos in node.all_processes.values():
            for info in infos:
                try:
                    top = psutil.Process(info.process.pid)
                    top.suspend()
                    procs.append(top)
                    for child in top.children(recursive=True):  # the node's workers and agents
                        child.suspend()
                        procs.append(child)
                except psutil.NoSuchProcess:
                    pass
        return procs

    def bury_worker(self, node: Any, frozen: list[Any]) -> None:
        """Kill a frozen worker node's processes for good and take it off the cluster."""
        import psutil  # type: ignore[import-untyped]

        for proc in frozen:
            try:
                proc.kill()
            except psutil.NoSuchProcess:
                pass
        frozen.clear()
        if node in self.workers:
            self.remove_worker(node)


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[LocalCluster]:
    """A head and two worker raylets; stops the session's single-node instance first, restores it after.

    Every socket, log and spill file is under a short temp folder (Unix socket paths < 108 bytes).
    """
    import ray
    from ray import cloudpickle

    _stop()
    folder = tempfile.mkdtemp(prefix="zrc-", dir=_short_temp_root())
    os.makedirs(os.path.join(folder, "ray"), exist_ok=True)  # where Cluster records the address
    saved = {k: os.environ.get(k) for k in ("TMPDIR", "RAY_TMPDIR")}
    sigterm = signal.getsignal(signal.SIGTERM)
    os.environ["TMPDIR"] = os.environ["RAY_TMPDIR"] = folder
    cloudpickle.register_pickle_by_value(ray_helpers)
    cluster = LocalCluster(folder)
    try:
        cluster.start_head()
        for _ in range(2):
            cluster.add_worker()
        ray.init(address=cluster.cluster.address, log_to_driver=False)
        yield cluster
    finally:
        ray.shutdown()
        cluster.cluster.shutdown()
        cloudpickle.unregister_pickle_by_value(ray_helpers)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        signal.signal(signal.SIGTERM, sigterm)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def ray_options() -> Iterator[None]:
    """Forget ``zephon_ray.configure`` settings after the test."""
    import zephon_ray

    zephon_ray.reset()
    yield
    zephon_ray.reset()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every Ray test counts as slow: each file pays the shared instance's start (10-15 s on 2 cores),
    so the quick loop (``-m "not slow"``) leaves Ray out and the full suite runs all of it."""
    for item in items:
        if _HERE in item.path.parents:
            item.add_marker(pytest.mark.slow)
