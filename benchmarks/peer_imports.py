"""Imports the benchmarks' peer loaders need, shared by every benchmark script that runs them."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import Any


def streaming_base() -> Any:
    """``streaming.base`` (Mosaic Streaming) without ``streaming/__init__``, which imports torchvision.

    PyPI's torchvision is a CUDA build that cannot load beside the CPU torch these benchmarks use,
    and the MDS reader and writer need none of it.
    """
    if "streaming" not in sys.modules:
        spec = importlib.util.find_spec("streaming")
        assert spec is not None and spec.submodule_search_locations
        pkg = types.ModuleType("streaming")
        pkg.__path__ = list(spec.submodule_search_locations)
        sys.modules["streaming"] = pkg
    return importlib.import_module("streaming.base")
