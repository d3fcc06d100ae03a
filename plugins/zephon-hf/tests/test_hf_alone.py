"""zephon-hf installed alone, with only its declared dependencies, in a fresh virtual environment.

``datasets`` is a test-only dependency: the installed reader must work without it (and without
torch or pandas). The data is therefore written here in the formats themselves, with pyarrow: an
Arrow stream plus ``state.json`` as ``save_to_disk`` writes them, and a hub ``data/`` folder.
zephon-parquet is a declared dependency but not published, so it is installed from the checkout
first, as pip would install it from an index.
"""

from __future__ import annotations

import pytest
from zephon_testkit.isolated import (
    build_wheels,
    clean_env,
    install_alone,
    installed,
    package_dir,
    pip_install,
    repository_root,
    run,
    run_script,
)

SCRIPT = r"""
import json, os, sys, tempfile
import numpy as np
from zephon_core import Dataset
from zephon_core.plugins import default_plugin_manager

names = default_plugin_manager().registry.names("reader")
assert names == ["hf", "memory", "parquet"], names
assert "pyarrow" not in sys.modules and "yaml" not in sys.modules  # registering imports neither
import pyarrow as pa, pyarrow.parquet as pq

d = tempfile.mkdtemp()
os.environ["ZEPHON_CACHE_DIR"] = os.path.join(d, "cache")
recs = [{"id": i, "text": f"row {i}", "tokens": list(range(i % 5)), "meta": {"k": i}} for i in range(300)]
saved = os.path.join(d, "saved")
os.makedirs(saved)
table = pa.Table.from_pylist(recs)
files = []
for k in range(2):
    name = f"data-{k:05d}-of-00002.arrow"
    with pa.ipc.new_stream(os.path.join(saved, name), table.schema) as writer:
        writer.write_table(table.slice(150 * k, 150), max_chunksize=64)
    files.append({"filename": name})
json.dump({"_data_files": files, "_split": "train"}, open(os.path.join(saved, "state.json"), "w"))
ds = Dataset.from_path("x", saved)
assert ds.format == "hf" and ds.num_samples == 300 and len(ds.shards) == 2, ds
assert ds.reader.read(1, np.array([149, 0, 7])) == [recs[299], recs[150], recs[157]]

hub = os.path.join(d, "hub", "data")
os.makedirs(hub)
pq.write_table(table.slice(0, 200), os.path.join(hub, "train-00000-of-00001.parquet"))
pq.write_table(table.slice(200), os.path.join(hub, "test-00000-of-00001.parquet"))
test = Dataset.from_path("t", os.path.dirname(hub), format="hf", split="test")
assert test.num_samples == 100 and test.reader.read(0, np.array([3])) == [recs[203]]
for heavy in ("datasets", "torch", "pandas", "yaml"):
    assert heavy not in sys.modules, heavy
print("ALONE OK")
"""


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_installed_alone(tmp_path):
    python = install_alone("zephon-parquet", tmp_path, timeout=600)  # the kernel, then the in-repo dependency
    root = repository_root()
    assert root is not None
    (hf,) = build_wheels([package_dir("zephon-hf", root)], tmp_path / "wheels", 600)
    run([*pip_install(python), str(hf)], 600)
    dists = installed(python)
    assert {"zephon-hf", "zephon-parquet", "zephon-core", "pyarrow", "pyyaml"} <= dists, sorted(dists)
    assert not dists & {"datasets", "torch", "pandas", "vortex-data", "zephon-jsonl"}, sorted(dists)
    out = run_script(python, SCRIPT, tmp_path, env=clean_env())
    assert "ALONE OK" in out
    listed = run([str(python.parent / "zephon"), "plugins", "--kind", "reader"], 120, env=clean_env())
    assert "zephon-hf" in listed
