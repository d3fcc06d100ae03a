"""zephon-mds installed alone (kernel + its declared dependencies only) reads MDS data.

One shared development environment hides a missing dependency, so this builds a fresh virtual
environment with the kernel, then ``plugins/zephon-mds``, and reads the fixtures there. It also
proves the point of the plugin: no torch, no mosaicml-streaming, no pyarrow installed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from zephon_testkit.isolated import check_alone, clean_env

DATA = Path(__file__).resolve().parent / "fixtures" / "data"

SCRIPT = """
import sys
from zephon_core import Dataset, Pipeline, ReaderError, StaticMixtureWorkSource
from zephon_storage.testing.tagged import load_expected, read_tagged

data = sys.argv[1]
for variant in ("plain", "zstd", "gz"):
    ds = Dataset.from_path(variant, f"{data}/{variant}")
    assert read_tagged(ds) == load_expected(data, variant)["samples"], variant

ds = Dataset.from_path("d", f"{data}/zstd")
pipe = Pipeline(StaticMixtureWorkSource([ds], chunk_size=16)).map_transform(lambda r: {"id": r["id"]}).batch(8)
with pipe:
    n = sum(len(b) for b in pipe)
assert n >= 100, n
try:
    Dataset.from_path("p", f"{data}/pickled")
except ReaderError as exc:
    assert "unpickling" in str(exc), exc
else:
    raise AssertionError("pkl column accepted?")
print("ALONE OK", n)
"""


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_installed_alone_with_declared_dependencies(tmp_path: Path) -> None:
    env = clean_env(ZEPHON_CACHE_DIR=str(tmp_path / "cache"))
    absent = {"torch", "litdata", "pyarrow", "mosaicml-streaming"}
    check_alone("zephon-mds", tmp_path, SCRIPT, str(DATA), absent=absent, env=env, listed_as="reader", timeout=900)
