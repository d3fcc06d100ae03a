"""Where and how the Ray runner starts its actors: options from code, environment and defaults.

The kernel builds a runner with no arguments (``runner="ray"`` is only a name), so the settings
that matter on a real cluster (its address, the code the workers need, the resources of each
actor) have to come from somewhere else: :func:`configure` for the whole process, ``ZEPHON_RAY_*``
environment variables for deployments that should not change code, or :class:`RayRunner`
keyword arguments for runners registered under another name. Code wins over the environment,
which wins over the defaults, the way ``ray.init(address=...)`` wins over ``RAY_ADDRESS``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from zephon_core.plugin_api import ConfigError

ENV_PREFIX = "ZEPHON_RAY_"

PLACEMENTS = {"spread": "SPREAD", "pack": "DEFAULT"}
"""``placement`` values and the Ray scheduling strategy each one means."""


@dataclass(frozen=True)
class RayOptions:
    """Settings of the Ray runner.

    Attributes:
        address: the Ray cluster to connect to when Ray is not initialised yet: ``"auto"`` (the
            cluster this node belongs to), ``"ray://head:10001"`` (Ray Client) or ``"head:6379"``.
            ``None`` starts a private local instance (or honours ``RAY_ADDRESS``, as Ray does).
        num_cpus: CPUs of a local instance (default: this machine's); ignored for a cluster.
        namespace: Ray namespace of the job (``None``: an anonymous one).
        runtime_env: the job's runtime environment, e.g. ``{"pip": ["zephon-core", "zephon-ray"]}``
            or ``{"py_modules": [...], "working_dir": "."}``, so workers can import your functions.
        actor_options: passed to ``ActorClass.options()`` for every actor: ``num_cpus``,
            ``memory``, ``resources``, ``scheduling_strategy``, ``runtime_env`` ...
        init_kwargs: any other ``ray.init`` keyword arguments (``_temp_dir``, ``logging_level`` ...).
        start_timeout: seconds to wait for the first actor of an operator to start before failing,
            so a cluster without the requested resources is an error, not a hang.
        tasks_per_actor: tasks handed to one actor at a time. 1 (the default) sends work to idle
            actors only; 2 queues one task behind the running one, hiding the round trip when
            tasks are small (a task queued behind one that kills its actor is re-run elsewhere).
        placement: where Ray puts an operator's actors: ``"spread"`` over as many nodes as possible
            (Ray's ``SPREAD``: a lost node takes few actors with it), ``"pack"`` onto as few as
            possible (Ray's default policy, which fills a node before the next: less network), or
            ``None`` to leave it to ``actor_options["scheduling_strategy"]`` (default: Ray's).
        max_task_crashes: how many actors one task may kill (its worker process died while running
            it: segfault, out of memory, SIGKILL) before it is an error naming the operator and the
            samples instead of a retry. A task whose actor was lost with its node (removed,
            preempted) is re-run without counting: the node, not the data, was at fault.
        max_parallelism: the largest pool the autotuner may grow an operator to
            (``options(autotune=True)``); ``None``: no ceiling but the autotuner's budget.
    """

    address: str | None = None
    num_cpus: int | None = None
    namespace: str | None = None
    runtime_env: dict[str, Any] | None = None
    actor_options: dict[str, Any] = field(default_factory=dict)
    init_kwargs: dict[str, Any] = field(default_factory=dict)
    start_timeout: float = 120.0
    tasks_per_actor: int = 1
    placement: str | None = None
    max_task_crashes: int = 2
    max_parallelism: int | None = None

    def validate(self) -> RayOptions:
        """Check types here, so a typo fails when the runner is configured, not deep inside Ray."""
        if self.address is not None and not isinstance(self.address, str):
            raise ConfigError(f"ray runner: address must be a string, got {self.address!r}")
        if self.num_cpus is not None and (not isinstance(self.num_cpus, int) or self.num_cpus < 1):
            raise ConfigError(f"ray runner: num_cpus must be an int >= 1, got {self.num_cpus!r}")
        for name in ("runtime_env", "actor_options", "init_kwargs"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, Mapping):
                raise ConfigError(f"ray runner: {name} must be a dict, got {type(value).__name__}")
        if "max_concurrency" in self.actor_options:
            raise ConfigError(
                "ray runner: actor_options may not set max_concurrency: each actor runs one task at a time"
            )
        if not isinstance(self.start_timeout, (int, float)) or self.start_timeout <= 0:
            raise ConfigError(f"ray runner: start_timeout must be a positive number, got {self.start_timeout!r}")
        if not isinstance(self.tasks_per_actor, int) or self.tasks_per_actor < 1:
            raise ConfigError(f"ray runner: tasks_per_actor must be an int >= 1, got {self.tasks_per_actor!r}")
        if self.placement is not None and self.placement not in PLACEMENTS:
            raise ConfigError(
                f"ray runner: placement must be one of {sorted(PLACEMENTS)} or None, got {self.placement!r}"
            )
        if self.placement is not None and "scheduling_strategy" in self.actor_options:
            raise ConfigError("ray runner: set either placement or actor_options['scheduling_strategy'], not both")
        for name in ("max_task_crashes", "max_parallelism"):
            value = getattr(self, name)
            if name == "max_parallelism" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"ray runner: {name} must be an int >= 1, got {value!r}")
        return self

    @property
    def scheduling_options(self) -> dict[str, Any]:
        """``actor_options`` with ``placement`` turned into Ray's ``scheduling_strategy``."""
        opts = dict(self.actor_options)
        if self.placement is not None:
            opts["scheduling_strategy"] = PLACEMENTS[self.placement]
        return opts

    @property
    def is_client(self) -> bool:
        """True for a Ray Client address (``ray://``), which accepts fewer ``ray.init`` options."""
        return bool(self.address) and str(self.address).startswith("ray://")


FIELDS = tuple(f.name for f in dataclasses.fields(RayOptions))
_JSON_FIELDS = {"runtime_env", "actor_options", "init_kwargs"}
_configured: dict[str, Any] = {}
_lock = threading.RLock()


def check_keys(options: Mapping[str, Any]) -> None:
    """Reject unknown option names with the list of valid ones."""
    unknown = sorted(set(options) - set(FIELDS))
    if unknown:
        raise ConfigError(f"ray runner: unknown option(s) {unknown}; valid options: {sorted(FIELDS)}")


def from_environment(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Options set as ``ZEPHON_RAY_<NAME>`` variables; dict-valued ones are JSON."""
    env = os.environ if environ is None else environ
    out: dict[str, Any] = {}
    for name in FIELDS:
        raw = env.get(ENV_PREFIX + name.upper())
        if raw is None or raw == "":
            continue
        var = ENV_PREFIX + name.upper()
        try:
            if name in _JSON_FIELDS:
                out[name] = json.loads(raw)
            elif name in ("num_cpus", "tasks_per_actor", "max_task_crashes", "max_parallelism"):
                out[name] = int(raw)
            elif name == "start_timeout":
                out[name] = float(raw)
            else:
                out[name] = raw
        except ValueError as exc:
            raise ConfigError(f"ray runner: environment variable {var}={raw!r} is not valid: {exc}") from exc
    return out


def configure(**options: Any) -> RayOptions:
    """Set process-wide options of the ``ray`` runner (before the pipeline starts its workers).

    Example:
        ``zephon_ray.configure(address="auto", actor_options={"num_cpus": 1})``

    Returns:
        The options now in force (environment and defaults included).
    """
    check_keys(options)
    with _lock:
        merged = {**_configured, **options}
        resolved = resolve({}, configured=merged)
        _configured.clear()
        _configured.update(merged)
    return resolved


def reset() -> None:
    """Forget everything :func:`configure` set (for tests and notebooks)."""
    with _lock:
        _configured.clear()


def resolve(overrides: Mapping[str, Any], *, configured: Mapping[str, Any] | None = None) -> RayOptions:
    """The options in force: runner arguments over :func:`configure` over environment over defaults."""
    check_keys(overrides)
    with _lock:
        conf = dict(_configured if configured is None else configured)
    merged = {**from_environment(), **conf, **overrides}
    for name in _JSON_FIELDS:
        if isinstance(merged.get(name), Mapping):
            merged[name] = dict(merged[name])
    return RayOptions(**merged).validate()
