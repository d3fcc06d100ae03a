"""zephon-lance installed alone, with only its declared dependencies, in a fresh virtual environment."""

from __future__ import annotations

import pytest
from zephon_testkit.isolated import check_alone

SCRIPT = r"""
import os, sys, tempfile
import numpy as np
from zephon_core import Dataset
from zephon_core.plugins import get_plugin_manager

names = get_plugin_manager().registry.names("reader")
assert names == ["lance", "memory"], names
assert "lance" not in sys.modules  # registering the plugin must not import lance
import pyarrow as pa, lance
d = os.path.join(tempfile.mkdtemp(), "x.lance")
recs = [{"id": i, "text": f"row {i}"} for i in range(1000)]
lance.write_dataset(pa.Table.from_pylist(recs), d, max_rows_per_file=400)
lance.dataset(d).delete("id = 5")
ds = Dataset.from_path("x", d)
assert ds.format == "lance" and ds.num_samples == 999, ds
assert ds.reader.read(0, np.array([398, 3, 5, 5])) == [recs[399], recs[3], recs[6], recs[6]]
assert "torch" not in sys.modules
print("ALONE OK")
"""


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_installed_alone(tmp_path):
    check_alone("zephon-lance", tmp_path, SCRIPT, present={"pylance", "pyarrow"}, absent={"torch"}, listed_as="reader")
