"""WebDataset reader plugin for Zephon (``format="webdataset"``).

Importing this package imports nothing heavy; the reader lives in :mod:`zephon_webdataset.reader`.
"""

from __future__ import annotations

__version__ = "0.1.0"
