"""Differential: every sample equals what webdataset's own tar iterator and key grouping yield.

Keys that need PAX headers (longer than 100 bytes, non-ASCII) and deep folders are included, so
the header walk is checked on more than plain ustar members.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from zephon_webdataset.testing import _webdataset, write_tar

from zephon_core import Dataset


def reference(path: Path) -> list[dict]:
    """The samples webdataset yields for one tar (``__url__`` dropped), fields as bytes."""
    t = _webdataset().tariterators
    with open(path, "rb") as stream:
        samples = list(t.group_by_keys(t.tar_file_expander([{"url": str(path), "stream": stream}])))
    return [{k: v for k, v in s.items() if k != "__url__"} for s in samples]


def test_samples_match_webdataset(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    long_dir = "very/" * 60 + "x" * 120 + "/"  # past ustar name + prefix: a PAX path record
    samples = []
    for i in range(60):
        key = [f"a/{i:04d}", f"{long_dir}{i:04d}", f"ünï/cødé-{i}", f"x{i}"][i % 4]
        s = {"__key__": key, "jpg": rng.integers(0, 256, int(rng.integers(0, 5000)), dtype=np.uint8).tobytes()}
        if i % 2:
            s["txt"] = f"caption {i}"
        if i % 3:
            s["seg.png"] = b"\x89PNG" * i
        samples.append(s)
    for k in range(2):
        write_tar(tmp_path / "d" / f"s{k}.tar", samples[k * 30 : (k + 1) * 30])
    ds = Dataset.from_path("x", str(tmp_path / "d"), decode_text=())
    for k in range(2):
        got = ds.reader.read(k, np.arange(ds.shards[k].num_samples))
        want = reference(tmp_path / "d" / f"s{k}.tar")
        assert len(want) == 30 and got == want
