"""numpy microbatches to torch tensors without copying.

``torch.from_numpy`` shares memory with the array, so a microbatch costs no copy on the host.
Pinned memory is a copy into page-locked memory that only pays off before an asynchronous
host-to-device transfer, so it is off by default and refused on machines without an accelerator.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

from zephon_core import ConfigError


def accelerator_available() -> bool:
    """Whether torch sees a device that pinned host memory could feed."""
    if hasattr(torch, "accelerator"):
        return bool(torch.accelerator.is_available())
    return torch.cuda.is_available()


def check_pin_memory(pin_memory: bool) -> None:
    """Fail at construction, not at the first batch, when pinning is impossible here.

    Raises:
        ConfigError: ``pin_memory`` is true but torch reports no accelerator.
    """
    if pin_memory and not accelerator_available():
        raise ConfigError(
            "pin_memory=True needs an accelerator (CUDA, XPU, ...): page-locked host memory only speeds up "
            "host-to-device copies, and torch reports no accelerator on this machine; use pin_memory=False"
        )


def to_tensors(
    arrays: Mapping[str, np.ndarray], *, pin_memory: bool = False, device: torch.device | str | None = None
) -> dict[str, torch.Tensor]:
    """Wrap each array as a tensor that shares its memory; optionally pin and move it.

    Read-only arrays and arrays with negative strides are copied once (torch cannot share them);
    numpy scalars and 0-d arrays become 0-d tensors.

    Args:
        arrays: the microbatch, e.g. ``SampleBatch.to_training()``.
        pin_memory: copy into page-locked memory (for ``non_blocking`` device copies).
        device: move every tensor there; ``non_blocking`` when pinned.
    """
    out: dict[str, torch.Tensor] = {}
    for key, value in arrays.items():
        arr = np.asarray(value)
        if not arr.flags.writeable or any(stride < 0 for stride in arr.strides):
            arr = arr.copy()
        t = torch.from_numpy(arr)
        if pin_memory:
            t = t.pin_memory()
        if device is not None:
            t = t.to(device, non_blocking=pin_memory)
        out[key] = t
    return out
