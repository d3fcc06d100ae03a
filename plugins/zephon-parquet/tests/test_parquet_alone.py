"""zephon-parquet installed alone, with only its declared dependencies, in a fresh virtual environment."""

from __future__ import annotations

import pytest
from zephon_testkit.isolated import check_alone

SCRIPT = r"""
import os, sys, tempfile
import numpy as np
from zephon_core import Dataset
from zephon_core.plugins import get_plugin_manager

names = get_plugin_manager().registry.names("reader")
assert names == ["memory", "parquet"], names
assert "pyarrow" not in sys.modules  # registering the plugin must not import pyarrow
import pyarrow as pa, pyarrow.parquet as pq
d = tempfile.mkdtemp()
os.environ["ZEPHON_CACHE_DIR"] = os.path.join(d, "cache")
recs = [{"id": i, "text": f"row {i}"} for i in range(1000)]
pq.write_table(pa.Table.from_pylist(recs), os.path.join(d, "a.parquet"), row_group_size=128)
ds = Dataset.from_path("x", d)
assert ds.format == "parquet" and ds.num_samples == 1000, ds
assert ds.reader.read(0, np.array([999, 3, 500])) == [recs[999], recs[3], recs[500]]
for heavy in ("vortex", "torch"):
    assert heavy not in sys.modules, heavy
print("ALONE OK")
"""


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_installed_alone(tmp_path):
    check_alone("zephon-parquet", tmp_path, SCRIPT, present={"pyarrow"}, absent={"vortex-data", "torch", "zstandard"})
