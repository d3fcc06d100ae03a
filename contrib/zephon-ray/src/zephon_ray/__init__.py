"""Zephon's Ray runner: run an operator's workers as a pool of Ray actors.

Select it with ``Pipeline(...).options(runner="ray")`` or per operator with ``runner="ray"``.
Ray is imported and initialised only when a pipeline starts a Ray operator, so installing this
package costs nothing to ``import zephon_core``. See ``docs/ray.md``.
"""

from __future__ import annotations

from zephon_ray.errors import RayWorkerError
from zephon_ray.options import RayOptions, configure, reset
from zephon_ray.runner import RayRunner, ray_runner_plugin

__version__ = "0.1.0"

__all__ = ["RayOptions", "RayRunner", "RayWorkerError", "configure", "ray_runner_plugin", "reset"]
