"""Decoded sample values as plain JSON ("tagged JSON"), for expected values committed beside fixtures.

Fixture datasets written by another library (LitData, Mosaic Streaming) are committed with every
sample's expected value, so the tests need neither that library nor torch. JSON has no bytes,
arrays, tuples or decimals, so :func:`tag` wraps those in one-key objects (``{"$bytes": ...}``,
``{"$ndarray": ..., "dtype": ..., "shape": ...}``, ...) and :func:`untag` turns them back. The
scripts that write the fixtures and the tests that read them use these same two functions, so the
rules cannot drift apart. Needs numpy only.
"""

from __future__ import annotations

import base64
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np


def tag(value: Any) -> Any:
    """Plain JSON for a decoded value, with tags for what JSON lacks."""
    if isinstance(value, dict):
        return {str(k): tag(v) for k, v in value.items()}
    if isinstance(value, list):
        return [tag(v) for v in value]
    if isinstance(value, tuple):
        return {"$tuple": [tag(v) for v in value]}
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"$bytes": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, np.ndarray):
        return {"$ndarray": value.tolist(), "dtype": str(value.dtype), "shape": list(value.shape)}
    if isinstance(value, np.generic):
        return {"$scalar": value.item(), "dtype": str(value.dtype)}
    if isinstance(value, Decimal):
        return {"$decimal": str(value)}
    if type(value).__module__ == "torch":  # a torch.Tensor, as the formats' own (torch) readers return
        return tag(value.numpy())
    return value


def untag(value: Any) -> Any:
    """The Python value a tagged JSON value stands for (inverse of :func:`tag`)."""
    if isinstance(value, list):
        return [untag(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "$bytes" in value:
        return base64.b64decode(value["$bytes"])
    if "$ndarray" in value:
        return np.array(value["$ndarray"], dtype=value["dtype"]).reshape(value["shape"])
    if "$scalar" in value:
        return np.dtype(value["dtype"]).type(value["$scalar"])
    if "$decimal" in value:
        return Decimal(value["$decimal"])
    if "$tuple" in value:
        return tuple(untag(v) for v in value["$tuple"])
    return {k: untag(v) for k, v in value.items()}


def load_expected(data_dir: Path, variant: str) -> dict[str, Any]:
    """``<data_dir>/<variant>.expected.json``: ``{"samples": [tagged sample, ...], ...}`` in dataset order."""
    expected: dict[str, Any] = json.loads((Path(data_dir) / f"{variant}.expected.json").read_text())
    return expected


def read_tagged(dataset: Any) -> list[Any]:
    """Every sample of a ``Dataset``, shard after shard, as tagged JSON (to compare with ``load_expected``)."""
    reader = dataset.reader
    return [tag(r) for s, info in enumerate(reader.shards()) for r in reader.read(s, np.arange(info.num_samples))]
