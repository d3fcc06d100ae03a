"""The Ray actor that hosts one copy of an operator's worker function.

This module is imported inside Ray worker processes, so it imports nothing but the standard
library and the plugin API (for :class:`ItemFailure`), and Ray only inside :meth:`WorkerActor.ready`:
the class becomes an actor through ``ray.remote(WorkerActor)`` on the driver.

The function arrives once, as pickled bytes, when the actor is created; afterwards a call carries
only its task. Failures are returned as data instead of raised, because a Ray task error is a
traceback-bearing wrapper whose message and type the stage could not use to name the failing
sample; a plain tuple keeps the original type name, message and :class:`ItemFailure` index.
"""

from __future__ import annotations

import os
import socket
import traceback
from typing import Any

from zephon_core.plugin_api import ItemFailure

Outcome = tuple[bool, Any]
"""``(True, result)`` or ``(False, (type name, message, traceback, item index or None, fused step or None))``."""


def describe_failure(exc: BaseException) -> tuple[str, str, str, int | None, int | None]:
    """The parts of a worker exception the driver needs, as plain picklable data.

    The fused step (set when the actor runs several fused steps in one task) lets the stage name the
    step that failed rather than the fused group.
    """
    index = exc.index if isinstance(exc, ItemFailure) else None
    step = getattr(exc, "fused_step", None)  # the kernel's FusedFailure mark (not in the plugin API yet)
    fused = step if isinstance(step, int) and not isinstance(step, bool) else None
    return type(exc).__name__, str(exc), traceback.format_exc(), index, fused


class WorkerActor:
    """One worker of one operator: loads the function once, then runs tasks one at a time."""

    def __init__(self, fn_bytes: bytes, label: str) -> None:
        from ray import cloudpickle  # the serializer that pickled the function on the driver

        self._label = label
        self._fn: Any = None
        self._load_error: str | None = None
        try:
            self._fn = cloudpickle.loads(fn_bytes)
        except BaseException as exc:  # reported by ready(), so the driver can name the operator
            self._load_error = f"{type(exc).__name__}: {exc}"

    def ready(self) -> tuple[int, str, str | None, str]:
        """``(pid, host, load error, Ray node id)``: the driver dispatches to this actor only after this returns.

        The node id lets the driver say on which node a task died and how many nodes the pool spans.
        """
        try:
            import ray  # present in every Ray worker; imported here, not at module level (see above)

            node = str(ray.get_runtime_context().get_node_id())
        except Exception:  # a Ray without the runtime context: the host name is all we can tell
            node = socket.gethostname()
        return os.getpid(), socket.gethostname(), self._load_error, node

    def run(self, task: Any) -> Outcome:
        """Run the worker function on ``task``; never raises, so a failure keeps its details."""
        try:
            return True, self._fn(task)
        except BaseException as exc:  # the stage decides; this actor keeps serving
            return False, describe_failure(exc)
