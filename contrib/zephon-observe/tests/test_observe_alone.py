"""zephon-observe installed alone, with only its declared dependencies, in a fresh virtual environment:
pyarrow comes with it, and the manifest, the commands and the observer registration all work."""

from __future__ import annotations

from pathlib import Path

import pytest
from zephon_testkit.isolated import check_alone

SCRIPT = r"""
import io, os, sys, tempfile
from contextlib import redirect_stdout
from zephon_core import Dataset, Pipeline, StaticMixtureWorkSource
from zephon_core.cli import main
from zephon_core.plugins import default_plugin_manager

registry = default_plugin_manager().registry
assert registry.names("observer") == ["manifest"], registry.names("observer")
assert registry.get("observer", "manifest").package == "zephon-observe"
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
