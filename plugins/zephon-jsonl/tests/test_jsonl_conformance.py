"""The kernel's reader conformance suite on jsonl files written by the format's own writer."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from zephon_storage.testing.readers import CorpusConformance


class TestJsonlConformance(CorpusConformance):
    dataset_format = "jsonl"

    def write(self, folder: Path, shards: list[list[dict]]) -> None:
        for k, recs in enumerate(shards):
            data = "".join(json.dumps(r) + "\n" for r in recs).encode()
            if k == 1:
                (folder / f"part-{k}.jsonl.gz").write_bytes(gzip.compress(data))
            else:
                (folder / f"part-{k}.jsonl").write_bytes(data)
