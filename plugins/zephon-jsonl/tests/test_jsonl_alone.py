"""zephon-jsonl installed alone, with only its declared dependencies, in a fresh virtual environment."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.isolated import install_alone, installed, run_script  # noqa: E402

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
    python = install_alone("zephon-jsonl", tmp_path)
    dists = installed(python)
    assert "zephon-jsonl" in dists and "zephon-core" in dists
    assert not dists & {"pyarrow", "vortex-data", "torch", "zstandard"}, dists
    assert "ALONE OK" in run_script(python, SCRIPT, tmp_path)
