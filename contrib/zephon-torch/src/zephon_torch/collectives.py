"""The loader's few collectives: bounded in time, JSON/bytes only, errors that say what to do.

``all_gather_object`` pickles and waits with the group's default timeout. The loader only ever
exchanges small integers, JSON states and (for verification) array bytes, so it sends raw bytes
and waits with an explicit timeout: when a peer dies, survivors raise
:class:`~zephon_torch.errors.RankFailureError` instead of hanging in a collective.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from zephon_torch.errors import RankFailureError
from zephon_torch.topology import DataParallelInfo


def collective_device(group: Any) -> torch.device:
    """Where tensors for ``group``'s backend must live (CPU for gloo, the current accelerator for NCCL etc.)."""
    backend = str(dist.get_backend(group)).lower()
    if backend in ("gloo", "mpi"):
        return torch.device("cpu")
    if backend == "nccl" and torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    accelerator = torch.accelerator.current_accelerator() if hasattr(torch, "accelerator") else None
    return accelerator if accelerator is not None else torch.device("cpu")


def _wait(work: Any, timeout: timedelta | None, what: str, info: DataParallelInfo, started: float) -> None:
    try:
        if timeout is None:
            work.wait()
        elif work.wait(timeout=timeout) is False:
            raise TimeoutError(f"no answer within {timeout.total_seconds():g} s")
    except Exception as exc:
        raise RankFailureError(
            f"{what} failed on data-parallel rank {info.rank} of {info.world_size} after "
            f"{time.monotonic() - started:.1f} s: another rank has likely died or is stuck "
            f"({type(exc).__name__}: {str(exc).strip()[:300]}). Every rank stops here instead of hanging; "
            "restart the job from its last checkpoint on the ranks that remain (any data-parallel size "
            "that divides the pipeline's lanes)."
        ) from exc


def all_reduce_sum(values: Sequence[int], info: DataParallelInfo, timeout: timedelta | None, what: str) -> list[int]:
    """Element-wise sum of ``values`` over the data-parallel group (identity without one)."""
    if not info.distributed:
        return list(values)
    started = time.monotonic()
    t = torch.tensor(list(values), dtype=torch.int64, device=collective_device(info.group))
    try:
        work = dist.all_reduce(t, op=dist.ReduceOp.SUM, group=info.group, async_op=True)
    except Exception as exc:  # the backend may fail before returning a handle
        _wait(_Failed(exc), timeout, what, info, started)
    _wait(work, timeout, what, info, started)
    return [int(x) for x in t.cpu().tolist()]


def all_gather_bytes(payload: bytes, info: DataParallelInfo, timeout: timedelta | None, what: str) -> list[bytes]:
    """Every data-parallel rank's ``payload``, in rank order (``[payload]`` without a group)."""
    if not info.distributed:
        return [payload]
    started = time.monotonic()
    device = collective_device(info.group)
    n = info.world_size
    size = torch.tensor([len(payload)], dtype=torch.int64, device=device)
    sizes = [torch.zeros(1, dtype=torch.int64, device=device) for _ in range(n)]
    try:
        work = dist.all_gather(sizes, size, group=info.group, async_op=True)
    except Exception as exc:
        _wait(_Failed(exc), timeout, what, info, started)
    _wait(work, timeout, what + " (sizes)", info, started)
    lengths = [int(s.item()) for s in sizes]
    longest = max(lengths)
    buf = torch.zeros(longest, dtype=torch.uint8)
    if payload:
        buf[: len(payload)] = torch.frombuffer(bytearray(payload), dtype=torch.uint8)
    buf = buf.to(device)
    out = [torch.empty(longest, dtype=torch.uint8, device=device) for _ in range(n)]
    try:
        work = dist.all_gather(out, buf, group=info.group, async_op=True)
    except Exception as exc:
        _wait(_Failed(exc), timeout, what, info, started)
    _wait(work, timeout, what, info, started)
    return [bytes(o[:k].cpu().numpy().tobytes()) for o, k in zip(out, lengths)]


class _Failed:
    """A work handle for a collective that raised while being issued (so one code path reports it)."""

    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    def wait(self, timeout: timedelta | None = None) -> bool:
        raise self.exc
