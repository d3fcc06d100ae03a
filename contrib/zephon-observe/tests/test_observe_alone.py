"""zephon-observe installed alone, with only its declared dependencies, in a fresh virtual environment:
pyarrow comes with it, and the manifest, the commands, run-time validation, the autotuner and the
observer registrations all work."""

from __future__ import annotations

from pathlib import Path

import pytest
from zephon_testkit.isolated import check_alone

SCRIPT = r"""
import io, os, random, sys, tempfile, warnings
from contextlib import redirect_stdout
from zephon_core import Dataset, Pipeline, StaticMixtureWorkSource
from zephon_core.cli import main
from zephon_core.plugins import default_plugin_manager

registry = default_plugin_manager().registry
assert registry.names("observer") == ["autotune", "manifest", "metrics", "validate"], registry.names("observer")
packages = {n: registry.get("observer", n).package for n in registry.names("observer")}
assert packages == {"autotune": "zephon-observe", "manifest": "zephon-observe", "metrics": "zephon-core", "validate": "zephon-observe"}, packages
d = tempfile.mkdtemp()
ds = Dataset.from_records("a", [{"i": i} for i in range(256)], shard_size=64)
p = Pipeline(StaticMixtureWorkSource([ds], chunk_size=16, seed=0)).batch(4).options(manifest=os.path.join(d, "m"))
with p:
    n = sum(1 for _ in p)
from zephon_observe.manifest import Manifest

assert Manifest(os.path.join(d, "m")).steps() == list(range(n)), n
out = io.StringIO()
with redirect_stdout(out):
    assert main(["manifest", "show", os.path.join(d, "m")]) == 0
assert "global steps 0-" in out.getvalue(), out.getvalue()
from zephon_core.validation import ValidationWarning

def coin(payload):
    return {**payload, "coin": random.random() < 0.5}

q = Pipeline(StaticMixtureWorkSource([ds], chunk_size=16, seed=0)).map_transform(coin).batch(4)
q = q.options(validate="warn", autotune=True, cpu_budget=4)
with warnings.catch_warnings(record=True) as caught, q:
    warnings.simplefilter("always")
    assert sum(1 for _ in q) == 64
    assert q.metrics()["autotune"]["budget"] == 4
assert [str(w.message) for w in caught if w.category is ValidationWarning] == q.stats()["validation"]["findings"] != []
for heavy in ("torch", "matplotlib", "prometheus_client"):
    assert heavy not in sys.modules, heavy
print("ALONE OK")
"""


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_installed_alone(tmp_path: Path) -> None:
    python = check_alone(
        "zephon-observe",
        tmp_path,
        SCRIPT,
        present={"pyarrow"},
        absent={"torch", "matplotlib", "prometheus-client"},
        listed_as="observer",
    )
    assert python.exists()
