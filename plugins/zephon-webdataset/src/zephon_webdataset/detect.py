"""Which files are WebDataset shards, and whether a folder is a WebDataset dataset.

Names only (hidden and ``_private`` paths are skipped): uncompressed ``.tar`` files. Compressed
shards (``.tar.gz``) have no random access and are not read; recompress them as plain tars.
"""

from __future__ import annotations

from zephon_storage import DataFiles

FILES = DataFiles((".tar",), "WebDataset tar shards (.tar)")

is_data_file = FILES.accepts
detect = FILES.detect
