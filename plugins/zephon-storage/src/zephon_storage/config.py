"""Where the node-local cache lives and how big it may grow (options, then environment, then defaults).

Readers take ``cache_dir=`` / ``cache_bytes=`` options; when they are not given, the environment
variables ``ZEPHON_CACHE_DIR`` and ``ZEPHON_CACHE_BYTES`` apply, so a cluster can point every job at
the node's scratch disk without touching training scripts.
"""

from __future__ import annotations

import os
import re

from zephon_core import ConfigError

DEFAULT_CACHE_BYTES = 64 * 1024**3
"""64 GiB: large enough for several shards per dataset, small next to a node's scratch disk."""

_UNITS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "m": 1000**2,
    "mb": 1000**2,
    "g": 1000**3,
    "gb": 1000**3,
    "t": 1000**4,
    "tb": 1000**4,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
}


def parse_bytes(value: int | str) -> int:
    """``10_000``, ``"512MiB"``, ``"20 GB"`` → bytes; a clear error otherwise.

    Args:
        value: an int or a number with an optional unit (decimal ``KB/MB/GB/TB`` or binary ``KiB…``).
    """
    if isinstance(value, bool):
        raise ConfigError(f"cache size must be a byte count, got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ConfigError(f"cache size must be >= 0, got {value}")
        return value
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*", str(value))
    if not m or m.group(2).lower() not in _UNITS:
        raise ConfigError(f"cannot read {value!r} as a byte count (examples: 1000000, '512MiB', '20GB')")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def default_cache_dir() -> str:
    """``$ZEPHON_CACHE_DIR``, else ``$XDG_CACHE_HOME/zephon``, else ``~/.cache/zephon``."""
    env = os.environ.get("ZEPHON_CACHE_DIR")
    if env:
        return os.path.abspath(os.path.expanduser(env))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "zephon")


def default_cache_bytes() -> int:
    """``$ZEPHON_CACHE_BYTES`` (any form :func:`parse_bytes` reads), else :data:`DEFAULT_CACHE_BYTES`."""
    env = os.environ.get("ZEPHON_CACHE_BYTES")
    return parse_bytes(env) if env else DEFAULT_CACHE_BYTES
