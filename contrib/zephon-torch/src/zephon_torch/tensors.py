"""numpy microbatches to torch tensors without copying; strings and bytes as Python lists.

``torch.from_numpy`` shares memory with the array, so a microbatch costs no copy on the host.
Fields torch has no dtype for (document ids, captions, URLs, source names: numpy unicode or
bytes arrays, or object arrays of ``str``/``bytes``) become lists, as torch's own
``default_collate`` hands them out, so a batch with an ``"id"`` next to its ``"input_ids"`` works
unchanged in a training loop. Anything else torch cannot hold (dicts, dates, structured records)
is refused with the field's name rather than with torch's dtype list.
Pinned memory is a copy into page-locked memory that only pays off before an asynchronous
host-to-device transfer, so it is off by default and refused on machines without an accelerator.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeAlias

import numpy as np
import torch

from zephon_core import ConfigError

Field: TypeAlias = "torch.Tensor | list[Any]"
"""One field of a microbatch as a training loop gets it: a tensor, or a list of ``str``/``bytes``."""

_TEXT_KINDS = frozenset("US")  # numpy unicode and bytes arrays
_NUMERIC_KINDS = frozenset("biufc")  # bool, ints, unsigned ints, floats, complex: what torch.from_numpy takes


def _as_list(arr: np.ndarray) -> list[Any] | None:
    """``arr`` as (nested) lists when it holds only strings or bytes, else None."""
    if arr.dtype.kind in _TEXT_KINDS:
        return list(arr.tolist()) if arr.ndim else [arr.item()]
    if arr.dtype == object and all(isinstance(v, (str, bytes)) for v in arr.flat):
        return list(arr.tolist()) if arr.ndim else [arr.item()]
    return None


def _refuse(key: str, arr: np.ndarray) -> ConfigError:
    if arr.dtype == object:
        kinds = sorted({type(v).__name__ for v in arr.flat if not isinstance(v, (str, bytes))})
        what = f"Python objects ({', '.join(kinds[:4])})"
    else:
        what = f"dtype {arr.dtype}"
    return ConfigError(
        f"microbatch field {key!r} holds {what}, which is neither numeric (a tensor) nor strings/bytes (a list): "
        "convert or drop it in a map_transform/map_batch before batching, e.g. encode it as numbers or as a JSON string"
    )


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
    arrays: Mapping[str, Any], *, pin_memory: bool = False, device: torch.device | str | None = None
) -> dict[str, Field]:
    """Wrap each numeric array as a tensor that shares its memory; strings and bytes become lists.

    Read-only arrays and arrays with negative strides are copied once (torch cannot share them);
    numpy scalars and 0-d arrays become 0-d tensors. Unicode and bytes arrays, and object arrays
    holding only ``str``/``bytes``, become (nested) Python lists with one entry per row, which
    ``pin_memory`` and ``device`` leave alone.

    Args:
        arrays: the microbatch, e.g. ``SampleBatch.to_training()``.
        pin_memory: copy tensors into page-locked memory (for ``non_blocking`` device copies).
        device: move every tensor there; ``non_blocking`` when pinned.

    Raises:
        ConfigError: a field is neither numeric nor strings/bytes (e.g. an object array of dicts,
            ``datetime64``, a structured dtype); the message names the field.
    """
    out: dict[str, Field] = {}
    for key, value in arrays.items():
        arr = np.asarray(value)
        if arr.dtype.kind not in _NUMERIC_KINDS:
            as_list = _as_list(arr)
            if as_list is None:
                raise _refuse(key, arr)
            out[key] = as_list
            continue
        if not arr.flags.writeable or any(stride < 0 for stride in arr.strides):
            arr = arr.copy()
        t = torch.from_numpy(arr)
        if pin_memory:
            t = t.pin_memory()
        if device is not None:
            t = t.to(device, non_blocking=pin_memory)
        out[key] = t
    return out
