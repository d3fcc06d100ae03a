"""The exception a failed Ray worker call becomes on the driver."""

from __future__ import annotations


class RayWorkerError(Exception):
    """An exception raised by an operator's worker function inside a Ray actor.

    The stage turns any worker exception into an ``OperatorError`` naming the operator and the
    samples of the work item; when the worker raised ``ItemFailure``, :attr:`index` lets the stage
    narrow that to the one failing sample, exactly as with the threads and processes runners.

    Attributes:
        type_name: the class name of the original exception.
        message: its message.
        remote_traceback: the traceback inside the actor, for debugging.
        index: the failing slot of the work item, when the worker said so.
        fused_step: in a fused task (several stateless steps run in one actor call), the step that
            failed, so the stage names it (``zephon_core.ops.contract.FusedFailure``).
    """

    def __init__(
        self,
        type_name: str,
        message: str,
        remote_traceback: str = "",
        index: int | None = None,
        fused_step: int | None = None,
    ) -> None:
        super().__init__(message if index is not None else f"{type_name}: {message}")
        self.type_name = type_name
        self.message = message
        self.remote_traceback = remote_traceback
        self.index = index
        self.fused_step = fused_step

    def __reduce__(self) -> tuple[type[RayWorkerError], tuple[str, str, str, int | None, int | None]]:
        return RayWorkerError, (self.type_name, self.message, self.remote_traceback, self.index, self.fused_step)
