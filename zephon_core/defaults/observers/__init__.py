"""Default plugin: the ``metrics`` observer, registered through ``zephon_register_observers``.

It pushes metric snapshots to ``options(metrics_callback=...)`` and to every plugin implementing
the ``zephon_metrics`` hook (:mod:`.metrics`). Not essential: with this plugin blocked, a pipeline
runs as before and ``metrics_callback`` says that no installed package provides it.
"""

from __future__ import annotations

from zephon_core.hookspecs import ObserverRegister, hookimpl

ZEPHON_CONTRACT = (1, 0)
"""Checked like any plugin's."""


@hookimpl
def zephon_register_observers(register: ObserverRegister) -> None:
    register(
        name="metrics",
        factory="zephon_core.defaults.observers.metrics:start_reporter",
        description="options(metrics_callback=...) and the zephon_metrics hook: snapshots every metrics_every_s",
    )
