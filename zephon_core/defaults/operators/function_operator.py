"""A base for plugin operators that are ``map_transform`` over a small frozen dataclass.

Plugins such as ``zephon-vision`` and ``zephon-av`` build every operator the same way: a per-record
function that is a frozen dataclass (picklable, so it runs on every runner; its fields are the
operator's configuration) run by the kernel's :class:`~zephon_core.defaults.operators.mapping.MapTransform`. The
accumulator then only passes records through and the worker is a pure function of the record, so
the determinism argument of ``map_transform`` holds unchanged; a function that declares ``rng``
gets the kernel's per-record generator, seeded from (``seed``, operator name, record key).

:class:`RecordFn` gives the function its configuration (its fields, JSON-able); :class:`FunctionOperator`
names the operator after its ``kind`` and fingerprints it by that configuration (plus ``seed`` when
the function draws random numbers) rather than by the function's qualified name, so renaming a
class never changes a fingerprint while changing an option always does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from zephon_core.defaults.operators.mapping import MapTransform

Payload = dict[str, Any]


def jsonable(value: Any) -> Any:
    """``value`` with tuples turned into lists (recursively), so a configuration survives a JSON round trip."""
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [jsonable(v) for v in value]
    return value


@dataclass(frozen=True)
class RecordFn:
    """Base of the per-record functions: a frozen dataclass whose fields are the configuration.

    ``omit_defaults`` names fields left out of the configuration while they hold the given value:
    an option added later then leaves the fingerprints (and checkpoints) of existing pipelines as
    they were.
    """

    omit_defaults: ClassVar[dict[str, Any]] = {}

    def config(self) -> dict[str, Any]:
        """JSON-able configuration: the fields, less those at an ``omit_defaults`` value."""
        config: dict[str, Any] = jsonable(asdict(self))
        for name, default in self.omit_defaults.items():
            if name in config and config[name] == default:
                del config[name]
        return config


class FunctionOperator(MapTransform):
    """``map_transform`` over one :class:`RecordFn`, named after the subclass's ``kind``.

    The configuration (and so the pipeline fingerprint) is the function's, plus ``seed`` for a
    function that takes the per-record generator.
    """

    kind: ClassVar[str] = ""

    def __init__(
        self,
        fn: Callable[..., Payload | None],
        *,
        seed: int = 0,
        parallelism: int = 1,
        runner: str | None = None,
        name: str | None = None,
        timeout_s: float | None = None,
    ) -> None:
        super().__init__(
            fn, seed=seed, parallelism=parallelism, runner=runner, name=name or self.kind, timeout_s=timeout_s
        )

    def config(self) -> dict[str, Any]:
        config: dict[str, Any] = dict(self.fn.config()) if isinstance(self.fn, RecordFn) else super().config()
        if self.takes_rng:
            config["seed"] = self.seed
        return config
