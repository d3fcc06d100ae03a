"""The ``ray`` runner: what the kernel instantiates for ``runner="ray"``."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from zephon_core.hookspecs import Register, hookimpl
from zephon_core.plugin_api import WorkerFn
from zephon_ray.options import RayOptions, check_keys, resolve

if TYPE_CHECKING:  # the executor imports Ray; the plugin scan must not
    from zephon_ray.executor import RayExecutor


class RayRunner:
    """Starts one pool of Ray actors per operator; the operator's parallelism is the pool size.

    The kernel calls ``RayRunner()`` with no arguments, so by default the options come from
    :func:`zephon_ray.configure` and ``ZEPHON_RAY_*`` variables. Keyword arguments override them;
    use :func:`ray_runner_plugin` to make such a runner selectable by its own name.

    Args:
        **options: any field of :class:`~zephon_ray.options.RayOptions`.
    """

    name = "ray"
    crosses_processes = True
    """Actors are other processes (zephon_core.runtime.runners.CrossesProcesses): the kernel fuses
    consecutive stateless steps into one task, sent to an actor once, and keeps the default
    collation in the training process."""

    def __init__(self, **options: Any) -> None:
        check_keys(options)
        self._overrides = dict(options)

    @property
    def options(self) -> RayOptions:
        """The options in force now (resolved when each operator starts, so later changes apply)."""
        return resolve(self._overrides)

    def start(self, fn: WorkerFn, parallelism: int, label: str) -> RayExecutor:
        """Create ``parallelism`` actors holding ``fn``; Ray is initialised here if it is not yet."""
        from zephon_ray.executor import RayExecutor

        return RayExecutor(fn, parallelism, label, self.options)


class _NamedRayRunnerPlugin:
    """A plugin object registering a Ray runner under another name with fixed options."""

    def __init__(self, name: str, description: str, options: dict[str, Any]) -> None:
        self.__name__ = f"zephon-ray ({name})"
        self._name = name
        self._description = description
        self._options = options

    @hookimpl
    def zephon_register_runners(self, register: Register) -> None:
        register(
            name=self._name,
            factory=functools.partial(RayRunner, **self._options),
            description=self._description,
        )


def ray_runner_plugin(name: str, *, description: str = "", **options: Any) -> object:
    """A plugin that adds a Ray runner called ``name`` with its own options.

    Per-operator resources need this: ``runner=`` takes a name, so a GPU decoder and a CPU
    tokenizer get two names. Pass the plugin to a plugin manager used by the pipeline::

        from zephon_core.plugins import ZephonPluginManager
        pm = ZephonPluginManager(plugins=[ray_runner_plugin("ray_gpu", actor_options={"num_gpus": 1})])
        Pipeline(ws, plugins=pm).map_transform(decode, parallelism=2, runner="ray_gpu")

    Raises:
        ConfigError: an unknown or invalid option.
    """
    check_keys(options)
    resolve(options)  # validate now, not when the pipeline starts
    return _NamedRayRunnerPlugin(name, description or f"Ray actors with {options}", dict(options))
