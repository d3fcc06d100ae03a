"""zephon-storage installed alone, with only its declared dependencies, in a fresh virtual environment:
a FileReader subclass reads through it, its commands are registered, and the kernel's former
``zephon_core.storage`` resolves its names here."""

from __future__ import annotations

from pathlib import Path

import pytest
from zephon_testkit.isolated import check_alone

SCRIPT = r"""
import io, os, sys, tempfile
from contextlib import redirect_stdout
import numpy as np
from zephon_core import Dataset, ShardInfo
from zephon_core.cli import main
from zephon_storage import DataFiles, FileReader, Storage, StorageBacked, in_request_order


class LinesReader(FileReader):
    format = "lines"
    data_files = DataFiles((".txt",), "text files (.txt)")

    def __init__(self, path, **storage):
        super().__init__(path, prefetch=0, open_files=4, manifest=True, storage=storage)
        self._init_runtime()

    def _open_file(self, i):
        local = self._local(i)
        with open(local.path) as f:
            return f.read().splitlines(), local.release

    def shards(self):
        return self._held_to_manifest([ShardInfo(f.rel, len(self._opened(i))) for i, f in enumerate(self.files())])

    def read(self, shard, indices):
        lines = self._opened(shard)
        uniq, inv = np.unique(np.asarray(indices, dtype=np.int64), return_inverse=True)
        return in_request_order([{"line": lines[i]} for i in uniq.tolist()], inv, len(indices))


d = tempfile.mkdtemp()
os.environ["ZEPHON_CACHE_DIR"] = os.path.join(d, "cache")
with open(os.path.join(d, "a.txt"), "w") as f:
    f.write("".join(f"line {i}\n" for i in range(50)))
reader = LinesReader(d)
assert isinstance(reader, StorageBacked) and isinstance(reader.storage, Storage)
ds = Dataset("x", reader)
assert ds.num_samples == 50 and reader.read(0, np.array([49, 3])) == [{"line": "line 49"}, {"line": "line 3"}]
out = io.StringIO()
with redirect_stdout(out):
    try:
        main(["--help"])
    except SystemExit:
        pass
assert "show, inspect, index: from zephon-storage" in out.getvalue(), out.getvalue()
from zephon_core.storage import FileReader as Former

assert Former is FileReader
for heavy in ("pyarrow", "torch", "moto"):
    assert heavy not in sys.modules, heavy
print("ALONE OK")
"""


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_installed_alone(tmp_path: Path) -> None:
    python = check_alone(
        "zephon-storage", tmp_path, SCRIPT, present={"fsspec", "numpy"}, absent={"pyarrow", "torch", "moto"}
    )
    assert python.exists()
