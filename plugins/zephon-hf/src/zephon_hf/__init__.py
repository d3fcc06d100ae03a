"""Hugging Face ``datasets`` reader plugin for Zephon (``format="hf"``).

Reads what ``datasets`` writes, without importing ``datasets``: ``save_to_disk`` folders (Arrow
files, memory-mapped) and hub-style Parquet repositories (through ``zephon-parquet``), one config
and split at a time. Importing this package imports neither pyarrow nor yaml; the readers live in
:mod:`zephon_hf.arrow` and :mod:`zephon_hf.parquet`, chosen by :func:`zephon_hf.reader.HFReader`.
"""

from __future__ import annotations

__version__ = "0.1.0"
