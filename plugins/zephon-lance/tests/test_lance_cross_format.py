"""The same rows as a Lance dataset and as plain Parquet files: identical global batches.

A reader's output is only its rows, so the same rows in the same shards must give the same training
batches whatever the format. The Parquet files are written by pyarrow and read by zephon-parquet,
one file per Lance fragment; the pipeline is run as two data-parallel ranks by the conformance
harness, which hashes every global step. With deleted rows, the Parquet side holds only the live
rows: deletions must be invisible downstream.
"""

from __future__ import annotations

import lance
import pytest
from zephon_storage.testing.readers import cross_format_hashes, plain_parquet, split

from zephon_core import Dataset
from zephon_core.testing.corpus import documents

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    docs = documents(limit=700)
    return [{**d, "lengths": [len(w) for w in d["text"].split()[:8]], "score": d["id"] / 7} for d in docs]


def test_lance_hashes_equal_parquet(rows, tmp_path, write_lance):
    shards = split(rows, [300, 250])
    write_lance(tmp_path / "docs.lance", shards)
    ds = Dataset.from_path("docs", str(tmp_path / "docs.lance"))
    assert [s.num_samples for s in ds.shards] == [300, 250, 150]
    hashes = cross_format_hashes(ds)
    assert len(hashes) >= 8
    assert hashes == cross_format_hashes(plain_parquet(tmp_path / "plain", shards))
    changed = [dict(r) for r in shards[1]]
    changed[0]["lengths"] = [*changed[0]["lengths"], 1]  # one nested value differs: exactly one step differs
    other = cross_format_hashes(plain_parquet(tmp_path / "changed", [shards[0], changed, shards[2]]))
    assert sum(a != b for a, b in zip(other, hashes)) == 1


def test_lance_with_deletions_hashes_equal_parquet_of_live_rows(rows, tmp_path, write_lance):
    shards = split(rows, [300, 250])
    write_lance(tmp_path / "docs.lance", shards)
    lance.dataset(str(tmp_path / "docs.lance")).delete("id % 3 = 1 OR id BETWEEN 320 AND 400")
    live = [[r for r in s if r["id"] % 3 != 1 and not 320 <= r["id"] <= 400] for s in shards]
    ds = Dataset.from_path("docs", str(tmp_path / "docs.lance"))
    assert [s.num_samples for s in ds.shards] == [len(s) for s in live]
    hashes = cross_format_hashes(ds)
    assert len(hashes) >= 4 and hashes == cross_format_hashes(plain_parquet(tmp_path / "plain", live))
