"""Building and running a plain pipeline imports no CLI, validation, conformance, observability or demo module.

A training job imports ``zephon_core``, builds a pipeline and iterates it; the command line, the
run-time validation probe (built on the conformance suite), the test kits, progress bars, the
provenance manifest, the stub generator and the demos are for other moments, and each stays
unimported until it is used, so a job neither pays for them nor breaks when one of them does.
Packages' ``plugin`` modules, which only register names, may be imported: every pipeline builds
its plugin manager. The probe runs in a fresh interpreter with every installed plugin, and is
shown to see such modules when they are used (``options(validate="warn")`` loads zephon-observe's
validation probe and the conformance suite).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

NOT_FOR_A_PLAIN_RUN = (
    "zephon_core.cli",  # and cli_meta
    "zephon_core.validation",
    "zephon_core.conformance",
    "zephon_core.testing",
    "zephon_core.progress",
    "zephon_core.demo",
    "zephon_demo.kernel",
    "zephon_demo.text",
    "zephon_stubs.generate",
    "zephon_stubs.command",
    "zephon_observe.manifest",
    "zephon_observe.validation",
    "zephon_observe.autotune",
    "zephon_observe.profile",
    "zephon_observe.export",
    "zephon_storage.cli_data",
    "zephon_storage.cli_index",
    "zephon_storage.validation",
)
"""Module prefixes a plain pipeline run must not import."""

PROBE = f"""
import json, sys
import zephon_core as z

def seen():
    return sorted(m for m in sys.modules if m.startswith({NOT_FOR_A_PLAIN_RUN!r}))

def plus_one(payload):
    return {{"i": payload["i"] + 1}}

def run(**options):
    ds = z.Dataset.from_records("a", [{{"i": i}} for i in range(64)], shard_size=16)
    p = z.Pipeline(z.StaticMixtureWorkSource([ds], chunk_size=16, seed=0)).map_transform(plus_one).batch(4)
    with p.options(lanes=2, **options) as p:
        assert sum(1 for _ in p) == 16

run()
plain = seen()
run(validate="warn")
print(json.dumps([plain, seen()]))
"""


def test_a_plain_pipeline_run_imports_none_of_them(tmp_path: Path) -> None:
    env = dict(os.environ, TMPDIR=str(tmp_path))
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=120, env=env, cwd=tmp_path
    )
    plain, validated = json.loads(out.stdout.strip().splitlines()[-1])
    assert plain == [], f"a plain pipeline run imported {plain}"
    # The probe sees them when they are used: the run with validation loads its probe and the suite.
    assert "zephon_observe.validation" in validated and any(m.startswith("zephon_core.conformance") for m in validated)
