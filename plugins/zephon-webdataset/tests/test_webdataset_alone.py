"""zephon-webdataset installed alone (kernel + declared dependencies) reads tars written by webdataset.

The tars are written here by ``webdataset.TarWriter``; the fresh environment has neither webdataset
nor torch, which is the point: reading needs neither.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from zephon_testkit.isolated import check_alone
from zephon_webdataset.testing import write_tar

SCRIPT = r"""
import os, sys, tempfile
import numpy as np
from zephon_core import Dataset, Pipeline, StaticMixtureWorkSource

os.environ["ZEPHON_CACHE_DIR"] = tempfile.mkdtemp()
ds = Dataset.from_path("x", sys.argv[1])
assert ds.format == "webdataset" and ds.num_samples == 60, ds
row = ds.reader.read(1, np.array([9]))[0]
assert row == {"__key__": "s/039", "jpg": b"\xff" * 39, "txt": "caption 39", "cls": 4}, row
pipe = Pipeline(StaticMixtureWorkSource([ds], chunk_size=8)).map_transform(lambda r: {"cls": r["cls"]}).batch(4)
with pipe:
    n = sum(len(b) for b in pipe)
assert n >= 48, n
for heavy in ("torch", "webdataset", "pyarrow"):
    assert heavy not in sys.modules, heavy
print("ALONE OK", n)
"""


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_installed_alone_with_declared_dependencies(tmp_path: Path) -> None:
    data = tmp_path / "data"
    for k in range(2):
        write_tar(
            data / f"shard-{k}.tar",
            [
                {"__key__": f"s/{i:03d}", "jpg": b"\xff" * i, "txt": f"caption {i}", "cls": i % 7}
                for i in range(k * 30, k * 30 + 30)
            ],
        )
    check_alone(
        "zephon-webdataset",
        tmp_path / "venv",
        SCRIPT,
        str(data),
        absent={"torch", "webdataset", "pyarrow"},
        listed_as="reader",
        timeout=900,
    )
