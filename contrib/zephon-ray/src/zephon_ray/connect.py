"""Lazy connection to Ray: nothing is started until a pipeline actually runs a Ray operator.

Importing the plugin must stay cheap (every ``import zephon_core`` plugin scan loads it), and a
training script that already called ``ray.init`` with its own settings must keep them. So Ray is
imported and initialised here, on the first executor, and only if nobody initialised it before.
"""

from __future__ import annotations

import os
import threading
from types import ModuleType
from typing import Any

from zephon_core.plugin_api import ConfigError
from zephon_ray.options import RayOptions

_lock = threading.Lock()


def import_ray() -> ModuleType:
    """``import ray`` with an error that says which package to install."""
    try:
        import ray
    except ImportError as exc:  # pragma: no cover - ray is a declared dependency
        raise ConfigError(f"the 'ray' runner needs Ray: pip install zephon-ray ({exc})") from exc
    return ray


def init_kwargs(opts: RayOptions, environ: dict[str, str] | None = None) -> dict[str, Any]:
    """The ``ray.init`` arguments for ``opts``.

    A local instance gets ``num_cpus`` and no dashboard (a data loader has no use for one);
    connecting to a cluster must not pass ``num_cpus`` (Ray rejects it), and Ray Client
    (``ray://``) accepts only a few arguments.
    """
    env = os.environ if environ is None else environ
    kwargs: dict[str, Any] = {"ignore_reinit_error": True}
    if opts.address:
        kwargs["address"] = opts.address
    if opts.namespace:
        kwargs["namespace"] = opts.namespace
    if opts.runtime_env:
        kwargs["runtime_env"] = dict(opts.runtime_env)
    if opts.is_client:
        del kwargs["ignore_reinit_error"]
    elif not opts.address and not env.get("RAY_ADDRESS"):
        kwargs["num_cpus"] = opts.num_cpus or os.cpu_count() or 1
        kwargs["include_dashboard"] = False
    kwargs.update(opts.init_kwargs)
    return kwargs


def ensure_ray(opts: RayOptions) -> ModuleType:
    """Return the ``ray`` module, initialised: connect or start a local instance if needed."""
    ray = import_ray()
    with _lock:
        if not ray.is_initialized():
            kwargs = init_kwargs(opts)
            try:
                ray.init(**kwargs)
            except Exception as exc:
                where = opts.address or os.environ.get("RAY_ADDRESS") or "a new local instance"
                raise ConfigError(
                    f"ray runner: cannot start or reach Ray ({where}): {type(exc).__name__}: {exc}"
                ) from exc
    return ray
