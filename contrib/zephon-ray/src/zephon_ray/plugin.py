"""Entry point of the ``zephon`` plugin group: registers the ``ray`` runner (lazily: no Ray import)."""

from __future__ import annotations

from typing import Any

from zephon_core.hookspecs import hookimpl


@hookimpl
def zephon_register_runners(register: Any) -> None:
    register(
        name="ray",
        factory="zephon_ray.runner:RayRunner",
        description="a pool of Ray actors per operator (local instance or cluster)",
    )
