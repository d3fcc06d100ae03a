"""JSON Lines reader plugin for Zephon (``format="jsonl"``).

Importing this package imports nothing heavy; the reader lives in :mod:`zephon_jsonl.reader`.
"""

from __future__ import annotations

__version__ = "0.1.0"
