"""Make this folder's helper modules importable (the repository runs pytest with ``--import-mode=importlib``).

Most tests run the text pipeline (``zephon-tokenize`` + ``zephon-pack``, installed in the
repository's environment but not dependencies of this package): where those plugins are
missing, those test modules are not collected.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

if not all(importlib.util.find_spec(name) for name in ("zephon_tokenize", "zephon_pack")):
    collect_ignore = ["test_multiprocess.py", "test_loader_local.py", "test_rank_failure.py"]
