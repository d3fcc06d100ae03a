"""Zephon reader for Mosaic Streaming MDS datasets, native: no torch, no ``mosaicml-streaming``.

Importing this package imports nothing heavy; the reader lives in :mod:`zephon_mds.reader` and is
loaded by Zephon's plugin registry on first use.
"""

from __future__ import annotations

__version__ = "0.1.0"
