"""The same rows as a save_to_disk folder, a hub layout and plain Parquet: identical global batches.

A reader's output is only its rows, so the same rows in the same shards must give the same
training batches whatever the format. The plain Parquet files are written by pyarrow (not by
``datasets``) with the same rows per file, and the pipeline is run as two data-parallel ranks by
the conformance harness, which hashes every global step.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from zephon_storage.testing.readers import cross_format_hashes, plain_parquet

from zephon_core import Dataset

pytestmark = pytest.mark.timeout(180)


def test_save_to_disk_hashes_equal_parquet(hf, rows, tmp_path):
    hf.Dataset.from_list(rows).save_to_disk(str(tmp_path / "saved"), num_shards=3)
    ds = Dataset.from_path("docs", str(tmp_path / "saved"))
    per_file = [s.num_samples for s in ds.shards]
    bounds = np.cumsum([0, *per_file])
    shards = [rows[a:b] for a, b in itertools.pairwise(bounds)]
    hashes = cross_format_hashes(ds)
    assert len(hashes) >= 8
    assert hashes == cross_format_hashes(plain_parquet(tmp_path / "plain", shards))
    changed = [dict(r) for r in shards[0]]
    changed[0]["meta"] = {**changed[0]["meta"], "chars": -1}  # one nested value differs: some step differs
    other = cross_format_hashes(plain_parquet(tmp_path / "changed", [changed, *shards[1:]]))
    assert other != hashes and sum(a != b for a, b in zip(other, hashes)) == 1


def test_hub_layout_hashes_equal_parquet(hf, rows, tmp_path):
    root = tmp_path / "hub" / "data"
    root.mkdir(parents=True)
    parts = [rows[:250], rows[250:400], rows[400:]]
    for k, part in enumerate(parts):
        hf.Dataset.from_list(part).to_parquet(str(root / f"train-{k:05d}-of-00003.parquet"))
    hf.Dataset.from_list(rows[:20]).to_parquet(str(root / "test-00000-of-00001.parquet"))
    ds = Dataset.from_path("docs", str(tmp_path / "hub"), format="hf", split="train")
    hashes = cross_format_hashes(ds)
    assert len(hashes) >= 8 and hashes == cross_format_hashes(plain_parquet(tmp_path / "plain", parts))
