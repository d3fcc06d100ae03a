"""Reading a folder ``zephon materialize`` wrote: its manifest, and the work source that replays it.

Kept apart from the writer (:mod:`zephon_recipes.materialize`), which builds pipelines from recipes:
building a recipe whose dataset is a materialised folder needs only this side, so the two import
each other in one direction only.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from zephon_core import Chunk, ConfigError, Dataset, ShardInfo
from zephon_core.plugin_api import (
    DEFAULT_WINDOW_TOKENS,
    ChunkSizing,
    Reader,
    ZephonPluginManager,
    default_plugin_manager,
)

MANIFEST = "zephon-materialized.json"
"""The manifest's file name in a materialised folder (its presence marks the folder as one)."""

SCHEMA = "zephon-materialized"
VERSION = 1


def is_materialized(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a folder ``zephon materialize`` wrote (it holds the manifest)."""
    return os.path.isfile(os.path.join(os.fspath(path), MANIFEST))


def read_manifest(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The manifest of a materialised folder, checked to be complete."""
    p = Path(path) / MANIFEST
    try:
        manifest: dict[str, Any] = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{p}: not a readable materialisation manifest ({exc})") from None
    if manifest.get("schema") != SCHEMA or manifest.get("version") != VERSION:
        raise ConfigError(f"{p}: not a zephon materialisation manifest of version {VERSION}")
    if not manifest.get("complete"):
        todo = sorted(set(range(int(manifest["lanes"]))) - set(manifest.get("complete_lanes", [])))
        raise ConfigError(
            f"{p}: the materialisation is not complete (lanes {todo} unfinished): run zephon materialize again to finish it"
        )
    return manifest


class _Restored(Reader):
    """A reader over written shards that gives numpy fields back their recorded dtype (and keeps
    the format's own reader for everything else), so a read-back record equals the one written."""

    def __init__(self, inner: Reader, fields: Mapping[str, Mapping[str, Any]]) -> None:
        self.inner = inner
        self.fields = {k: (np.dtype(v["dtype"]), int(v["ndim"])) for k, v in fields.items()}
        self.format = inner.format  # type: ignore[misc]

    def shards(self) -> list[ShardInfo]:
        return self.inner.shards()

    def read(self, shard: int, indices: np.ndarray) -> list[dict[str, Any]]:
        out = self.inner.read(shard, indices)
        for r in out:
            for name, (dtype, ndim) in self.fields.items():
                if name in r and r[name] is not None:
                    v = np.asarray(r[name], dtype=dtype)
                    r[name] = v[()] if ndim == 0 else v
        return out

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()

    def close(self) -> None:
        self.inner.close()

    def stop_prefetch(self) -> None:
        self.inner.stop_prefetch()


class MaterializedSource(ChunkSizing):
    """A work source replaying a materialised prefix: chunk ``g`` holds exactly the records (and
    sample ids) the online pipeline's prefix produced for chunk ``g``.

    Its dataset table has the original datasets' names, each read from its folder of written shards
    by the format's own reader; it reports the recorded target shares, mixing unit and token
    estimates, and resolves ``flush_every_k_chunks="auto"`` to the online pipeline's window, so the
    operators after the prefix see what they saw online. It ends after the materialised chunks.

    Read-back equality needs: the same number of lanes (refused otherwise); the remaining operators,
    batch and data-changing options of the original recipe. The last windows before the end of the
    written data differ from an online run that goes on (a lane that runs dry flushes).
    """

    def __init__(self, path: str | os.PathLike[str], *, plugins: ZephonPluginManager | None = None) -> None:
        self.path = os.fspath(path)
        m = read_manifest(self.path)
        self.manifest = m
        if m["format"] not in ("parquet", "webdataset"):
            raise ConfigError(f"{self.path}: unknown materialised format {m['format']!r}")
        registry = (plugins if plugins is not None else default_plugin_manager()).registry
        reader_format = m["format"]
        self.names: list[str] = list(m["datasets"])
        self._datasets: list[Dataset] = []
        shard_of: list[dict[str, int]] = []
        for name in self.names:
            files = sorted(
                f["path"]
                for shards in m["lane_shards"].values()
                for s in shards
                for n, f in s["files"].items()
                if n == name
            )
            if not files:
                raise ConfigError(
                    f"{self.path}: dataset {name!r} has no records in the materialised chunks; materialise more chunks"
                )
            inner = registry.make_reader(reader_format, os.path.join(self.path, name))
            ds = Dataset(name, _Restored(inner, m["fields"].get(name, {})), format=reader_format)
            ids = [s.id.replace(os.sep, "/") for s in ds.shards]
            mapping = {f"{name}/{sid.rsplit('/', 1)[-1]}": i for i, sid in enumerate(ids)}
            missing = [f for f in files if f not in mapping]
            if missing or len(ids) != len(files):
                raise ConfigError(
                    f"{self.path}/{name}: the files on disk are not the ones the manifest lists ({missing[:3] or ids[:3]}); materialise again"
                )
            self._datasets.append(ds)
            shard_of.append(mapping)
        sids: list[np.ndarray] = []
        shard_col: list[np.ndarray] = []
        row_col: list[np.ndarray] = []
        for lane_shards in m["lane_shards"].values():
            for s in lane_shards:
                ids_arr = np.load(os.path.join(self.path, s["index"]["path"]), allow_pickle=False)
                d = ids_arr >> np.int64(48)
                shard = np.empty(len(ids_arr), dtype=np.int64)
                row = np.empty(len(ids_arr), dtype=np.int64)
                for dn, name in enumerate(self.names):
                    sel = np.flatnonzero(d == dn)
                    if len(sel):
                        shard[sel] = shard_of[dn][s["files"][name]["path"]]
                        row[sel] = np.arange(len(sel))
                sids.append(ids_arr)
                shard_col.append(shard)
                row_col.append(row)
        all_ids = np.concatenate(sids) if sids else np.empty(0, dtype=np.int64)
        order = np.lexsort((all_ids & np.int64(0xFFFF), (all_ids >> np.int64(16)) & np.int64(0xFFFFFFFF)))
        self._ids = all_ids[order]
        self._shard = np.concatenate(shard_col)[order] if sids else np.empty(0, dtype=np.int64)
        self._row = np.concatenate(row_col)[order] if sids else np.empty(0, dtype=np.int64)
        self._chunk_of = (self._ids >> np.int64(16)) & np.int64(0xFFFFFFFF)
        self.tokens_per_sample = dict(m["tokens_per_sample"]) if m.get("tokens_per_sample") else None
        self._init_chunking(None, int(m.get("window_tokens") or DEFAULT_WINDOW_TOKENS))

    # -- the contract -------------------------------------------------------------------------------
    @property
    def datasets(self) -> Sequence[Dataset]:
        return self._datasets

    @property
    def mixing_unit(self) -> Any:
        return self.manifest["mixing_unit"]

    @property
    def token_estimates_use(self) -> Literal["required", "optional"] | None:
        """The chunks are written: nothing to size."""
        return None

    def flush_every_for_window(self) -> int:
        """``flush_every_k_chunks="auto"`` as the online pipeline resolved it."""
        return int(self.manifest["flush_every_k_chunks"])

    def chunk(self, number: int) -> Chunk | None:
        lo, hi = np.searchsorted(self._chunk_of, [number, number + 1])
        if lo == hi:
            return None
        ids = self._ids[lo:hi]
        offsets = ids & np.int64(0xFFFF)
        if offsets[0] != 0 or not np.array_equal(offsets, np.arange(len(ids))):
            raise ConfigError(
                f"{self.path}: chunk {number} is not complete in the index (offsets {offsets[:5].tolist()}...)"
            )
        return Chunk(int(number), (ids >> np.int64(48)).astype(np.int64), self._shard[lo:hi], self._row[lo:hi], 0)

    def target_weights(self) -> dict[str, float]:
        return {n: float(self.manifest["target_weights"][n]) for n in self.names}

    def with_token_estimates(self, tokens_per_sample: Mapping[str, float]) -> MaterializedSource:
        return self

    def with_lanes(self, num_lanes: int) -> MaterializedSource:
        """The same source; refused unless ``num_lanes`` is the lane count the prefix was written with."""
        if num_lanes != int(self.manifest["lanes"]):
            raise ConfigError(
                f"{self.path}: written for {self.manifest['lanes']} lanes, read with lanes={num_lanes}: each lane's "
                "records, windows and randomness depend on the lane count; read it back with options lanes="
                f"{self.manifest['lanes']}"
            )
        return self

    def describe(self) -> dict[str, Any]:
        return {
            "type": "MaterializedSource",
            "prefix": self.manifest["fingerprint"],
            "format": self.manifest["format"],
            "chunks": self.manifest["chunks"],
            "shard_records": self.manifest["shard_records"],
            "datasets": [d.describe() for d in self._datasets],
        }

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if state:
            raise ConfigError(f"MaterializedSource keeps no state, but the checkpoint has {sorted(state)}")

    def _fewest_tokens_per_sample(self) -> float:
        return min((self.tokens_per_sample or {"": 1.0}).values())


def read_materialized(
    path: str | os.PathLike[str], *, plugins: ZephonPluginManager | None = None
) -> MaterializedSource:
    """The work source of a materialised folder: ``Pipeline(read_materialized("out/")).pack_sequences(...)``."""
    return MaterializedSource(path, plugins=plugins)
