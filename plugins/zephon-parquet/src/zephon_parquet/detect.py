"""Which files are Parquet data, and whether a dataset folder is a Parquet dataset.

Names only (Spark's ``_SUCCESS``, ``_metadata`` and other private paths are skipped): detection
runs for every ``Dataset.from_path`` and must not import pyarrow.
"""

from __future__ import annotations

from zephon_storage import DataFiles

FILES = DataFiles((".parquet", ".pq"), "Parquet files (.parquet, .pq)")

is_data_file = FILES.accepts
detect = FILES.detect
