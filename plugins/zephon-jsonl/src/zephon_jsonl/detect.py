"""Which files are JSON Lines data, and whether a dataset folder is a JSON Lines dataset.

Names only (hidden and ``_private`` paths are skipped): ``.jsonl`` and ``.ndjson``, each optionally
compressed as a whole (``.gz``, ``.zst``, ``.zstd``).
"""

from __future__ import annotations

from zephon_storage import DataFiles

FILES = DataFiles(
    (".jsonl", ".ndjson"),
    "JSON Lines files (.jsonl, .ndjson, optionally .gz/.zst)",
    compressions=(("", "none"), (".gz", "gzip"), (".zst", "zstd"), (".zstd", "zstd")),
)

compression_of = FILES.compression_of
is_data_file = FILES.accepts
detect = FILES.detect
