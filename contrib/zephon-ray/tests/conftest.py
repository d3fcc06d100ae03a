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


@pytest.fixture
def ray_options() -> Iterator[None]:
    """Forget ``zephon_ray.configure`` settings after the test."""
    import zephon_ray

    zephon_ray.reset()
    yield
    zephon_ray.reset()
