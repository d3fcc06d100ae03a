"""Which files are Vortex data, and whether a dataset folder is a Vortex dataset.

Names only (hidden and ``_private`` paths are skipped): detection runs for every
``Dataset.from_path`` and must not import vortex.
"""

from __future__ import annotations

from zephon_storage import DataFiles

FILES = DataFiles((".vortex", ".vtx"), "Vortex files (.vortex, .vtx)")

is_data_file = FILES.accepts
detect = FILES.detect
