"""zephon-pack installed alone (a regular, non-editable install) with only its declared dependencies."""

from __future__ import annotations

import pytest
from zephon_testkit.isolated import check_alone

SCRIPT = r"""
import sys
import numpy as np
from zephon_core import Dataset, Pipeline, StaticMixtureWorkSource
from zephon_core.plugins import get_plugin_manager

ops = get_plugin_manager().registry.names("operator")
assert "pack_sequences" in ops and "tokenize" not in ops, ops
docs = [{"input_ids": np.arange(n, dtype=np.int32)} for n in (5, 3, 9, 2, 6)]
ws = StaticMixtureWorkSource([Dataset.from_records("d", docs)], chunk_size=5, shuffle=False)
with Pipeline(ws).pack_sequences(target_length=8, algorithm="best_fit").batch(1) as p:
    rows = [b.to_training() for b in p]
assert sum(int(r["attention_mask"].sum()) for r in rows) == 25
assert all(r["cu_seqlens"].shape == (1, 9) for r in rows)
assert "tokenizers" not in sys.modules
print("ALONE OK")
"""


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_installed_alone(tmp_path):
    check_alone("zephon-pack", tmp_path, SCRIPT, present={"numpy"}, absent={"tokenizers", "zephon-tokenize", "torch"})
