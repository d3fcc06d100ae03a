"""WebDataset shards on S3 (moto's server on loopback): uploaded indexes, header-only indexing, ranged reads."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from zephon_storage.testing.readers import check_reader, split
from zephon_webdataset.testing import as_sample, write_tar

from zephon_core import Dataset, ReaderError
from zephon_core.testing.corpus import documents

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]  # moto server + three datasets: ~25 s on a loaded machine


def test_s3_ranged_reads_uploaded_and_built_indexes(tmp_path: Path) -> None:
    pytest.importorskip("moto.server")
    from zephon_testkit.s3 import moto_s3

    shards = [[as_sample(d) for d in part] for part in split(documents(limit=300), [100, 100, 100])]
    local = tmp_path / "local"
    for k, part in enumerate(shards):
        write_tar(local / f"shard-{k:02d}.tar", part)
    Dataset.from_path("l", str(local))  # the .zidx files uploaded with the data
    cache = tmp_path / "node-cache"
    with moto_s3("wds-tests") as s3:
        s3.upload_dir(str(local), "with-index")
        for k in range(3):
            s3.put(f"bare/shard-{k:02d}.tar", (local / f"shard-{k:02d}.tar").read_bytes())
        opts = {"storage_options": s3.storage_options, "cache_dir": str(cache)}
        ds = Dataset.from_path("a", s3.url("with-index"), format="webdataset", **opts)
        assert ds.reader.built_indexes == 0  # downloaded, not rebuilt
        assert check_reader(ds, shards) >= 300
        assert not (cache / "shards").exists() or not any((cache / "shards").iterdir())  # no whole-file copies

        bare = Dataset.from_path("b", s3.url("bare/shard-{00..02}.tar"), format="webdataset", **opts)
        assert bare.reader.built_indexes == 3 and len(list((cache / "index").glob("*.zidx"))) == 6
        assert check_reader(bare, shards) >= 300

        whole = Dataset.from_path("c", s3.url("bare"), format="webdataset", download=True, **opts)
        assert whole.reader.read(2, np.array([99, 0])) == [shards[2][99], shards[2][0]]
        assert any((cache / "shards").iterdir())

        # Replaced after listing with other samples of another size: an error naming the object.
        s3.put("bare/shard-01.tar", (local / "shard-00.tar").read_bytes()[:20_480] + b"\0" * 50_000)
        with pytest.raises(ReaderError, match=r"s3://wds-tests/bare/shard-01\.tar: "):
            bare.reader.read(1, np.arange(100))
        s3.client.delete_object(Bucket=s3.bucket, Key="bare/shard-02.tar")
        with pytest.raises(ReaderError, match=r"s3://wds-tests/bare/shard-02\.tar: not found"):
            bare.reader.read(2, np.array([1]))
