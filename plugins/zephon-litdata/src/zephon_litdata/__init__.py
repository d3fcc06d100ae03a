"""Zephon reader for LitData datasets (``litdata.optimize`` output), native: no torch, no litdata.

Importing this package imports nothing heavy; the reader lives in :mod:`zephon_litdata.reader` and
is loaded by Zephon's plugin registry on first use.
"""

from __future__ import annotations

__version__ = "0.1.0"
