"""`zephon demo` (the README's main command) runs the text pipeline and passes its self-check."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def test_registered_through_the_zephon_entry_point_group():
    """The demo is an ordinary plugin: listed with this package, without importing pyarrow."""
    code = (
        "import sys, json; from zephon_core.plugins import default_plugin_manager; "
        "reg = default_plugin_manager().registry.get('demo', 'text'); "
        "print(json.dumps([reg.package, reg.factory, 'pyarrow' in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == '["zephon-demo", "zephon_demo.text:main", false]'
    listed = subprocess.run(
        [sys.executable, "-m", "zephon_core.cli", "demo", "--list"], capture_output=True, text=True, timeout=120
    )
    assert listed.returncode == 0, listed.stderr
    rows = [line.split()[:3] for line in listed.stdout.splitlines()]
    assert ["text", "zephon-demo", "0.1.0"] in rows and ["kernel", "zephon-demo", "0.1.0"] in rows, rows


@pytest.mark.slow
def test_zephon_demo_quick(tmp_path):
    env = dict(os.environ, ZEPHON_DEMO_DIR=str(tmp_path / "corpus"))
    out = subprocess.run([sys.executable, "-m", "zephon_core.cli", "demo", "--quick"], capture_output=True, text=True,
                         timeout=600, env=env)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    text = out.stdout
    assert "ALL GLOBAL BATCH HASHES MATCHED" in text
    assert "usable (non-padding) tokens/s" in text and "padding:" in text
    shares = {}
    for part in text.split("token shares: ")[1].splitlines()[0].split(", "):
        name, pct = part.split()[:2]
        shares[name] = float(pct.rstrip("%"))
    assert abs(shares["plays"] - 70) < 3 and abs(shares["lines"] - 30) < 3, shares
    assert (tmp_path / "corpus" / "plays-parquet" / "part-0.parquet").exists()
    assert (tmp_path / "corpus" / "lines-jsonl" / "part-0.jsonl").exists()
