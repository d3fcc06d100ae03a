"""`zephon demo vlm`: the corpus is deterministic and the same in every format, and the demo
passes its own determinism self-check (runners, parallelism, world sizes, resume 2 -> 4, formats)."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("skimage.data")


def test_registered_through_the_zephon_entry_point_group():
    """An ordinary plugin: listed with this package, without importing the vision stack or pyarrow."""
    code = (
        "import sys, json; from zephon_core.plugins import default_plugin_manager; "
        "reg = default_plugin_manager().registry.get('demo', 'vlm'); "
        "print(json.dumps([reg.package, reg.factory, 'pyarrow' in sys.modules, 'PIL' in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == '["zephon-vlm-demo", "zephon_vlm_demo.vlm:main", false, false]'


def test_corpus_is_deterministic_and_mixed():
    from zephon_vlm_demo import corpus

    a, b = list(corpus.samples(12, seed=3)), list(corpus.samples(12, seed=3))
    assert [hashlib.sha256(r["jpg"]).hexdigest() for r in a] == [hashlib.sha256(r["jpg"]).hexdigest() for r in b]
    assert [r["txt"] for r in a] == [r["txt"] for r in b]
    assert all(r["jpg"][:2] == b"\xff\xd8" and 6 <= len(r["txt"].split()) <= 60 for r in a)
    assert len({len(r["jpg"]) for r in a}) == 12


def test_every_copy_holds_the_same_samples(tmp_path):
    from zephon_vlm_demo import corpus

    from zephon_core import Dataset

    c = corpus.write(tmp_path, n=24, shard_size=8)
    assert set(c.paths) | set(c.skipped) == set(corpus.FORMATS)
    assert "parquet" in c.paths
    expected = list(corpus.samples(24))
    for fmt, path in c.paths.items():
        ds = Dataset.from_path("photos", str(path))
        assert ds.num_samples == 24 and len(ds.shards) == 3, fmt
        got = [ds.reader.read(i, np.arange(s.num_samples)) for i, s in enumerate(ds.shards)]
        rows = [r for shard in got for r in shard]
        assert [bytes(r["jpg"]) for r in rows] == [r["jpg"] for r in expected], fmt
        assert [r["txt"] for r in rows] == [r["txt"] for r in expected], fmt
    again = corpus.write(tmp_path, n=24, shard_size=8)  # cached: nothing rewritten
    assert again.paths == c.paths


@pytest.mark.slow
def test_vlm_demo_self_check(tmp_path, capsys):
    from zephon_vlm_demo import vlm

    assert vlm.run(steps=3, n=48, root=tmp_path, image_size=56, seq=128)
    out = capsys.readouterr().out
    assert "ALL GLOBAL BATCH HASHES MATCHED" in out and "MISMATCH" not in out
    assert "images/s" in out and "usable (non-padding) tokens/s" in out
    assert out.count(" OK") >= 3
