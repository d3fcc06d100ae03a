"""zephon-vortex installed alone, with only its declared dependencies, in a fresh virtual environment."""

from __future__ import annotations

import pytest
from zephon_testkit.isolated import check_alone

SCRIPT = r"""
import os, sys, tempfile
import numpy as np
from zephon_core import Dataset
from zephon_core.plugins import get_plugin_manager

names = get_plugin_manager().registry.names("reader")
assert names == ["memory", "vortex"], names
assert "vortex" not in sys.modules  # registering the plugin must not import vortex
import pyarrow as pa, vortex as vx
d = tempfile.mkdtemp()
os.environ["ZEPHON_CACHE_DIR"] = os.path.join(d, "cache")
recs = [{"id": i, "text": f"row {i}"} for i in range(1000)]
vx.io.write(vx.array(pa.Table.from_pylist(recs)), os.path.join(d, "a.vortex"))
ds = Dataset.from_path("x", d)
assert ds.format == "vortex" and ds.num_samples == 1000, ds
assert ds.reader.read(0, np.array([999, 3, 3])) == [recs[999], recs[3], recs[3]]
assert "torch" not in sys.modules
print("ALONE OK")
"""


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_installed_alone(tmp_path):
    check_alone("zephon-vortex", tmp_path, SCRIPT, present={"vortex-data", "pyarrow"}, absent={"torch", "zstandard"})
