"""zephon-jsonl installed alone, with only its declared dependencies, in a fresh virtual environment."""

from __future__ import annotations

import pytest
from zephon_testkit.isolated import check_alone

SCRIPT = r"""
import gzip, json, os, sys, tempfile
import numpy as np
from zephon_core import Dataset
from zephon_core.plugins import get_plugin_manager

names = get_plugin_manager().registry.names("reader")
assert names == ["jsonl", "memory"], names
d = tempfile.mkdtemp()
os.environ["ZEPHON_CACHE_DIR"] = os.path.join(d, "cache")
recs = [{"id": i, "text": f"line {i}"} for i in range(100)]
with open(os.path.join(d, "a.jsonl"), "w") as f:
    f.writelines(json.dumps(r) + "\n" for r in recs)
with open(os.path.join(d, "b.jsonl.gz"), "wb") as f:
    f.write(gzip.compress("".join(json.dumps(r) + "\n" for r in recs).encode()))
ds = Dataset.from_path("x", d)
assert ds.format == "jsonl" and ds.num_samples == 200, ds
assert ds.reader.read(1, np.array([99, 3])) == [recs[99], recs[3]]
for heavy in ("pyarrow", "vortex", "torch"):
    assert heavy not in sys.modules, heavy
print("ALONE OK")
"""


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_installed_alone(tmp_path):
    check_alone("zephon-jsonl", tmp_path, SCRIPT, absent={"pyarrow", "vortex-data", "torch", "zstandard"})
