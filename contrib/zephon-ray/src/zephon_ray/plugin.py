"""Entry point of the ``zephon`` plugin group: registers the ``ray`` runner (lazily: no Ray import)."""

from __future__ import annotations

from zephon_core.hookspecs import Register, hookimpl

ZEPHON_CONTRACT = (1, 0)
"""The zephon plugin contract this plugin is built for (the kernel refuses an incompatible one)."""


@hookimpl
def zephon_register_runners(register: Register) -> None:
    register(
        name="ray",
        factory="zephon_ray.runner:RayRunner",
        description="a pool of Ray actors per operator (local instance or cluster)",
    )
