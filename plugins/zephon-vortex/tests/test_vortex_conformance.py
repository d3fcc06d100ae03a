"""The kernel's reader conformance suite on vortex files written by the format's own writer."""

from __future__ import annotations

from pathlib import Path

from zephon_storage.testing.readers import CorpusConformance


class TestVortexConformance(CorpusConformance):
    dataset_format = "vortex"

    def write(self, folder: Path, shards: list[list[dict]]) -> None:
        import pyarrow as pa
        import vortex as vx
        from zephon_vortex.index import build_index

        for k, recs in enumerate(shards):
            vx.io.write(vx.array(pa.Table.from_pylist(recs)), str(folder / f"part-{k}.vortex"))
        build_index(str(folder))  # `zephon index`: the manifest lets a missing shard be detected
