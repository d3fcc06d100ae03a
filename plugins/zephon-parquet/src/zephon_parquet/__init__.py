"""Parquet reader plugin for Zephon (``format="parquet"``).

Importing this package does not import pyarrow; the reader lives in :mod:`zephon_parquet.reader`.
"""

from __future__ import annotations

__version__ = "0.1.0"
