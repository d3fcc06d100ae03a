"""Which test modules run.

Most tests run the text pipeline (:mod:`zephon_torch.testing.text`: ``zephon-tokenize`` +
``zephon-pack``, installed in the repository's environment but not dependencies of this package):
where those plugins are missing, those test modules are not collected.
"""

from __future__ import annotations

import importlib.util

if not all(importlib.util.find_spec(name) for name in ("zephon_tokenize", "zephon_pack")):
    collect_ignore = ["test_multiprocess.py", "test_loader_local.py", "test_rank_failure.py"]
