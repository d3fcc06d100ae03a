"""Materialising a prefix of a recipe: the records its first operators produce, written once and read back.

``zephon materialize train.yaml --until tokenize --to out/`` runs the recipe's datasets, mixture
and operators up to and including ``tokenize``, and writes what comes out as Parquet files
(pyarrow) or WebDataset tar files (``tarfile``), with a manifest. A recipe whose dataset is ``out/``
and whose operators are the rest of the chain then gives the same global batches as the whole
recipe run online (the done-when of "tokenize offline, pack online").

How the records are laid out, and why that makes read-back exact:

* The online pipeline deals the source's numbered chunks to ``L`` lanes, and every stateful
  operator after the prefix (packing, shuffling, ``ensure_mixture``) works per lane, flushes at
  the lane's window boundaries, draws randomness from each record's identity (chunk, offset) and
  reads its dataset from the sample id. So read-back must give every lane the same chunks, of the
  same sizes, holding the same records with the same ids, from a dataset table with the same
  names and target shares. The written folder keeps all of it: the records, and for each a sample
  id (dataset, chunk, offset) in ``index/``; :class:`MaterializedSource` rebuilds chunk ``g``
  exactly from them, with the recorded mixture shares, token estimates and window.
* That is only possible when the prefix maps records one to one: each record out is one record
  in, in order, none dropped. The prefix is checked for it before anything runs (a stateful step,
  such as ``shuffle`` or ``pack_sequences``, or one that may emit several records per input, is
  refused) and while it runs (a filtered record is refused, naming the operator's kind).
* Each lane is run by its own pipeline (rank ``l`` of ``L`` ranks, one lane each), and every
  ``shard_records`` records of a lane make one shard: the shard's content is a function of the
  recipe and these two numbers only, not of the runner, the parallelism or where a run stopped.

Files are written under temporary names and renamed when complete; the manifest (written
atomically after every shard) lists the complete shards with their SHA-256, record counts and the
lane pipeline's checkpoint after them. A restart verifies the listed shards, resumes each lane from
the checkpoint after its last good shard and rewrites the rest, so a run killed half-way and
restarted writes the same bytes as one that ran through.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import io
import json
import math
import os
import re
import tarfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from zephon_core import ConfigError, Pipeline
from zephon_core.plugin_api import (
    ZephonPluginManager,
    dataset_of,
    default_plugin_manager,
    diff_definitions,
    split_sample_id,
)
from zephon_recipes import identity
from zephon_recipes.document import RecipeError
from zephon_recipes.materialized import (
    MANIFEST,
    SCHEMA,
    VERSION,
    MaterializedSource,
    is_materialized,
    read_manifest,
    read_materialized,
)

if TYPE_CHECKING:
    from zephon_recipes.validate import Plan

FORMATS = ("parquet", "webdataset")
SUFFIX = {"parquet": ".parquet", "webdataset": ".tar"}
DEFAULT_SHARD_RECORDS = 4096
"""Records per shard per lane unless told otherwise."""

_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")
_TMP = ".tmp-"

Format = Literal["parquet", "webdataset"]


# -- writers ----------------------------------------------------------------------------------------
def _field_kind(value: Any) -> dict[str, Any] | None:
    """What a payload value needs to be restored exactly after a round trip (numpy dtypes), or None."""
    if isinstance(value, np.ndarray):
        return {"dtype": value.dtype.str, "ndim": value.ndim}
    if isinstance(value, np.generic):
        return {"dtype": value.dtype.str, "ndim": 0}
    return None


def _plain(value: Any) -> Any:
    """A payload value as pyarrow / JSON takes it (numpy arrays and scalars to lists and Python numbers)."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def write_parquet(rows: Sequence[Mapping[str, Any]], path: str, where: str) -> None:
    """``rows`` as one Parquet file, with fixed writer options so the bytes depend on the rows only.

    Columns are in sorted name order; one row group per file (shards are sized by records already);
    zstd level 3, dictionary encoding and statistics on, format 2.6, data page v1. The bytes are the
    same for the same rows and the same pyarrow version (its version string is in the footer).
    """
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ConfigError(
            "materialize --format parquet needs pyarrow: pip install pyarrow (or use --format webdataset)"
        ) from None

    names = sorted({k for r in rows for k in r})
    columns: dict[str, list[Any]] = {n: [] for n in names}
    for r in rows:
        for n in names:
            v = r.get(n)
            if isinstance(v, np.ndarray) and v.ndim > 1:
                raise ConfigError(
                    f"{where}: field {n!r} holds a {v.ndim}-d array {v.shape}: Parquet materialisation keeps 1-d arrays; "
                    "use --format webdataset (arrays are stored as .npy) for images and other n-d arrays"
                )
            columns[n].append(_plain(v))
    try:
        table = pa.table({n: pa.array(columns[n]) for n in names})
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise ConfigError(f"{where}: the records do not fit one Parquet schema ({exc})") from None
    pq.write_table(
        table,
        path,
        row_group_size=max(1, len(rows)),
        compression="zstd",
        compression_level=3,
        use_dictionary=True,
        write_statistics=True,
        version="2.6",
        data_page_version="1.0",
        store_schema=True,
    )


def _member(name: str, data: bytes) -> tuple[tarfile.TarInfo, io.BytesIO]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = 0
    info.mode = 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info, io.BytesIO(data)


def _encode(value: Any) -> tuple[str, bytes]:
    """A field's WebDataset extension and bytes: ``.npy`` for arrays, ``.txt``, ``.bin``, else ``.json``."""
    if isinstance(value, np.ndarray):
        buf = io.BytesIO()
        np.save(buf, value, allow_pickle=False)
        return "npy", buf.getvalue()
    if isinstance(value, str):
        return "txt", value.encode("utf-8")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "bin", bytes(value)
    return "json", json.dumps(_plain(value), sort_keys=True, separators=(",", ":")).encode()


def write_webdataset(rows: Sequence[Mapping[str, Any]], keys: Sequence[str], path: str, where: str) -> None:
    """``rows`` as one WebDataset tar: member ``KEY.FIELD.EXT`` per field, in row then field-name order.

    Every member has mtime 0, uid/gid 0, no user or group name and mode 0644, and the archive is
    plain ustar, so the bytes depend on the rows only.
    """
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tar:
        for key, row in zip(keys, rows):
            for field in sorted(row):
                if "." in field or "/" in field:
                    raise ConfigError(
                        f"{where}: field name {field!r} cannot be a WebDataset member suffix (no '.' or '/')"
                    )
                ext, data = _encode(row[field])
                tar.addfile(*_member(f"{key}.{field}.{ext}", data))


def _sha256(path: str | os.PathLike[str]) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(path.name + f"{_TMP}{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


# -- the prefix -------------------------------------------------------------------------------------
@dataclasses.dataclass
class Prefix:
    """The part of a recipe that is materialised: its plan, data form and fingerprint."""

    plan: Plan
    form: dict[str, Any]
    fingerprint: str
    until: str
    where: str


def _until_index(steps: Sequence[str], until: str | int, where: str) -> int:
    if isinstance(until, int) or (isinstance(until, str) and until.isdigit()):
        i = int(until)
        if not 0 <= i < len(steps):
            raise RecipeError(
                [f"{where}: --until {until}: the recipe has {len(steps)} operator(s) (0 to {len(steps) - 1})"]
            )
        return i
    found = [i for i, s in enumerate(steps) if s == until]
    if not found:
        from zephon_recipes.validate import closest

        raise RecipeError(
            [
                f"{where}: --until {until!r}: no such operator in the recipe{closest(until, steps)} (its operators: {', '.join(steps) or 'none'})"
            ]
        )
    if len(found) > 1:
        raise RecipeError(
            [
                f"{where}: --until {until!r}: the recipe has it {len(found)} times (operators {found}); give its index instead"
            ]
        )
    return found[0]


def prefix_of(recipe: Any, until: str | int) -> Prefix:
    """The recipe's datasets, mixture, fetch and operators up to and including ``until`` (a name or index).

    Raises:
        RecipeError: ``until`` names no operator (closest match given), or one of the prefix's
            operators does not map records one to one (read-back could not be exact).
    """
    where = recipe.doc.files[-1] if recipe.doc.files else "recipe"
    names = [s.operator for s in recipe.plan.steps]
    i = _until_index(names, until, where)
    plan = copy.copy(recipe.plan)
    plan.steps = list(recipe.plan.steps[: i + 1])
    for k, step in enumerate(plan.steps):
        op = recipe.plugins.registry.get("operator", step.operator).load()(**step.kwargs)
        traits = op.traits
        if traits.stateful or traits.fanout != "one":
            why = (
                "holds records across a lane (it is stateful)"
                if traits.stateful
                else "may emit several records per input"
            )
            raise RecipeError(
                [
                    f"{recipe.doc.where(('operators', k, step.operator))}: operator {step.operator!r} {why}: a materialised "
                    "prefix must map records one to one so that read-back gives the same batches; end the prefix "
                    f"before it (--until {names[k - 1] if k else '...'}) and run it after reading back"
                ]
            )
    data = {k: v for k, v in recipe.doc.data.items() if k not in ("batch", "operators")}
    data["operators"] = list(recipe.doc.data.get("operators") or [])[: i + 1]
    form = identity.data_form(data)
    form.pop("batch", None)
    return Prefix(plan, form, identity.fingerprint(form), names[i], where)


def _keep_rows(rows: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """The collate of a materialising pipeline: the records themselves (one object array), not stacked."""
    out = np.empty(len(rows), dtype=object)
    for i, r in enumerate(rows):
        out[i] = r
    return {"records": out}


def _lane_pipeline(prefix: Prefix, plugins: ZephonPluginManager, lane: int, lanes: int, shard_records: int) -> Pipeline:
    """The prefix as rank ``lane`` of ``lanes`` ranks: one lane, whose records come out in shards."""
    from zephon_recipes.build import build

    plan = copy.copy(prefix.plan)
    plan.batch = {"microbatch_size": shard_records, "collate": _keep_rows, "drop_last": False}
    options = {k: v for k, v in prefix.plan.options.items() if k not in ("manifest", "dp_rank", "dp_world_size")}
    options.update(dp_rank=lane, dp_world_size=lanes)
    plan.options = options
    return build(plan, plugins, prefix.where)


# -- materialising ----------------------------------------------------------------------------------
@dataclasses.dataclass
class Report:
    """What one ``materialize`` call did."""

    path: str
    written: int = 0
    kept: int = 0
    records: int = 0
    lanes_done: list[int] = dataclasses.field(default_factory=list)

    def __str__(self) -> str:
        return (
            f"materialised {self.records:,} record(s) into {self.path}: {self.written} shard(s) written, "
            f"{self.kept} complete shard(s) kept (hashes verified); manifest {os.path.join(self.path, MANIFEST)}"
        )


def _lane_bound(layout_lanes: int, lane: int, chunks: int | None) -> int | None:
    """Chunks of ``lane`` among the first ``chunks`` global chunks (modulo assignment)."""
    if chunks is None:
        return None
    return max(0, math.ceil((chunks - lane) / layout_lanes))


def _check_finite(recipe: Any, chunks: int | None) -> None:
    if chunks is not None:
        return
    mix = recipe.doc.data.get("mixture") or {}
    ex = mix.get("exhaustion", "stop") if isinstance(mix, dict) else "stop"
    values = list(ex.values()) if isinstance(ex, dict) else [ex]
    if any(v == "repeat" for v in values) and not mix.get("stop_after_passes"):
        raise RecipeError(
            [
                f"{recipe.doc.where(('mixture', 'exhaustion'))}: exhaustion 'repeat' never ends: give --chunks N (materialise the first N chunks)"
            ]
        )


def _verify(root: Path, shard: Mapping[str, Any]) -> bool:
    for entry in [*shard["files"].values(), shard["index"]]:
        p = root / entry["path"]
        if not p.is_file() or _sha256(p) != entry["sha256"]:
            return False
    return True


def materialize(
    recipe: str | os.PathLike[str] | Any,
    to: str | os.PathLike[str],
    *,
    until: str | int,
    format: Format = "parquet",
    chunks: int | None = None,
    shard_records: int = DEFAULT_SHARD_RECORDS,
    overrides: Iterable[str] | Mapping[str, Any] = (),
    plugins: ZephonPluginManager | None = None,
    on_shard: Callable[[int, int], None] | None = None,
) -> Report:
    """Write the records a recipe's prefix produces into ``to`` (see the module docstring).

    Args:
        recipe: a recipe file, or a :class:`~zephon_recipes.Recipe` already read.
        to: the folder to write (created; a folder holding an unfinished materialisation of the
            same prefix is completed, one of another prefix is refused).
        until: the last operator of the prefix, by name (``"tokenize"``) or index in the chain.
        format: ``"parquet"`` (readable back by ``Pipeline``/recipes) or ``"webdataset"``.
        chunks: materialise the first ``chunks`` global chunks (required when the mixture repeats
            forever); None: until the source ends.
        shard_records: records per shard per lane (part of the layout: change it and the files change).
        overrides: ``--set`` overrides of the recipe.
        plugins: the plugin manager (default: every installed plugin).
        on_shard: called with ``(lane, shard)`` after each shard is complete and recorded.

    Raises:
        RecipeError: the recipe, the prefix or the folder is not usable (one line per problem).
    """
    from zephon_recipes.build import Recipe, read_recipe

    if format not in FORMATS:
        raise ConfigError(f"materialize: format must be one of {list(FORMATS)}, got {format!r}")
    if not isinstance(shard_records, int) or isinstance(shard_records, bool) or shard_records < 1:
        raise ConfigError(f"materialize: shard_records must be an int >= 1, got {shard_records!r}")
    if chunks is not None and (not isinstance(chunks, int) or isinstance(chunks, bool) or chunks < 1):
        raise ConfigError(f"materialize: chunks must be an int >= 1 (or None: until the source ends), got {chunks!r}")
    pm = plugins if plugins is not None else default_plugin_manager()
    rec: Recipe = recipe if isinstance(recipe, Recipe) else read_recipe(recipe, overrides, plugins=pm)
    prefix = prefix_of(rec, until)
    _check_finite(rec, chunks)
    lanes = int(rec.plan.options.get("lanes", 1))
    if rec.plan.options.get("lane_assignment", "modulo") != "modulo":
        raise RecipeError(
            [f"{rec.doc.where(('options', 'lane_assignment'))}: materialising needs lane_assignment 'modulo'"]
        )
    for d in rec.plan.datasets:
        if not _NAME.match(d.name):
            raise RecipeError(
                [
                    f"{rec.doc.where(('datasets', d.name))}: dataset name {d.name!r} must be a file name (letters, digits, _ . -) to be materialised"
                ]
            )
    root = Path(to)
    root.mkdir(parents=True, exist_ok=True)
    for stale in [*root.rglob(f"*{_TMP}*")]:
        stale.unlink()

    # what the whole recipe's pipeline sees of its source: read-back must show operators the same
    with rec.build() as full:
        estimates = full.calibrate()
        flush_every = full.flush_every
        names = [d.name for d in full.source.datasets]
        weights = {n: float(w) for n, w in full.source.target_weights().items()}
        unit = full.source.mixing_unit
        window_tokens = getattr(full.source, "window_tokens", None)
        full_source = full.definition()["source"]
    header = {
        "schema": SCHEMA,
        "version": VERSION,
        "recipe": prefix.form,
        "fingerprint": prefix.fingerprint,
        "until": prefix.until,
        "format": format,
        "chunks": chunks,
        "shard_records": shard_records,
        "lanes": lanes,
        "flush_every_k_chunks": flush_every,
        "window_tokens": window_tokens,
        "datasets": names,
        "target_weights": weights,
        "mixing_unit": unit,
        "tokens_per_sample": estimates,
    }
    path = root / MANIFEST
    manifest: dict[str, Any]
    if path.exists():
        manifest = json.loads(path.read_text(encoding="utf-8"))
        old = {k: manifest.get(k) for k in header}
        if old != header:
            # the fingerprint summarises the recipe keys, which are named instead
            diffs = [
                d.replace(" in checkpoint, ", " in the folder, ")
                for d in diff_definitions(old, header)
                if not d.startswith("fingerprint:")
            ]
            raise RecipeError(
                [
                    f"{root}: holds a materialisation of another prefix or layout ({'; '.join(diffs[:6])}); write to another folder or delete it"
                ]
            )
    else:
        manifest = {
            **header,
            "fields": {},
            "lane_shards": {str(lane): [] for lane in range(lanes)},
            "complete_lanes": [],
            "complete": False,
        }
        _write_json(path, manifest)

    report = Report(str(root))
    for lane in range(lanes):
        shards: list[dict[str, Any]] = manifest["lane_shards"][str(lane)]
        good = 0
        while good < len(shards) and _verify(root, shards[good]):
            good += 1
        if good < len(shards) or lane not in manifest["complete_lanes"]:
            if lane in manifest["complete_lanes"]:
                manifest["complete_lanes"].remove(lane)
            del shards[good:]
        report.kept += good
        report.records += sum(s["records"] for s in shards)
        if lane in manifest["complete_lanes"]:
            report.lanes_done.append(lane)
            continue
        _materialize_lane(
            prefix, pm, manifest, root, lane, chunks, shard_records, format, report, on_shard, full_source
        )
    manifest["complete"] = sorted(manifest["complete_lanes"]) == list(range(lanes))
    _write_json(path, manifest)
    return report


def _materialize_lane(
    prefix: Prefix,
    pm: ZephonPluginManager,
    manifest: dict[str, Any],
    root: Path,
    lane: int,
    chunks: int | None,
    shard_records: int,
    fmt: Format,
    report: Report,
    on_shard: Callable[[int, int], None] | None,
    full_source: Any,
) -> None:
    """Run lane ``lane``'s pipeline (rank ``lane`` of ``lanes`` ranks) from its last good shard on."""
    shards: list[dict[str, Any]] = manifest["lane_shards"][str(lane)]
    names: list[str] = manifest["datasets"]
    lanes = int(manifest["lanes"])
    pipeline = _lane_pipeline(prefix, pm, lane, lanes, shard_records)
    kinds = ", ".join(repr(s.operator) for s in prefix.plan.steps)
    with pipeline:
        if (
            pipeline.calibrate() != manifest["tokens_per_sample"]
            or pipeline.flush_every != manifest["flush_every_k_chunks"]
            or pipeline.definition()["source"] != full_source
        ):
            raise RecipeError(
                [
                    f"{prefix.where}: the operators after {prefix.until!r} change how the source is chunked (they estimate "
                    "tokens, which sizes chunks and windows): move the tokenizer into the prefix, or set "
                    "mixture.chunk_size and options.flush_every_k_chunks explicitly"
                ]
            )
        if shards:
            pipeline.load_state_dict(shards[-1]["state"])
        bound = _lane_bound(lanes, lane, chunks)
        expect: int | None = None  # the last record key delivered (records are 1-to-1 and in order)
        done = bound == 0
        for batch in [] if done else pipeline:
            if batch.dropped:
                raise RecipeError(
                    [
                        f"{prefix.where}: the prefix ({kinds}) dropped record(s) (a filter): a materialised prefix must keep every record"
                    ]
                )
            rows: list[dict[str, Any]] = []
            ids: list[int] = []
            for rec_payload, lineage in zip(batch.data["records"], batch.lineage):
                if len(lineage) != 1:
                    raise RecipeError(
                        [
                            f"{prefix.where}: a record of the prefix comes from {len(lineage)} samples: the prefix must be 1-to-1"
                        ]
                    )
                sid = int(lineage[0])
                g, _ = split_sample_id(sid)
                if bound is not None and g // lanes >= bound:
                    done = True
                    break
                key = sid & ((1 << 48) - 1)  # (chunk, offset), without the dataset bits
                if expect is not None and key <= expect:
                    raise RecipeError(
                        [
                            f"{prefix.where}: the prefix ({kinds}) reordered or repeated records: it must keep their order"
                        ]
                    )
                expect = key
                rows.append(rec_payload)
                ids.append(sid)
            if rows:
                _write_shard(manifest, root, lane, len(shards), rows, ids, names, fmt, pipeline)
                report.written += 1
                report.records += len(rows)
                _write_json(root / MANIFEST, manifest)
                if on_shard is not None:
                    on_shard(lane, len(shards) - 1)
            if done or len(rows) < shard_records:
                break
    manifest["complete_lanes"] = sorted({*manifest["complete_lanes"], lane})
    report.lanes_done.append(lane)
    _write_json(root / MANIFEST, manifest)


def _write_shard(
    manifest: dict[str, Any],
    root: Path,
    lane: int,
    k: int,
    rows: list[dict[str, Any]],
    ids: list[int],
    names: list[str],
    fmt: Format,
    pipeline: Pipeline,
) -> None:
    """Shard ``k`` of ``lane``: one file per dataset with records in it, and the index of sample ids."""
    stem = f"lane-{lane:04d}-part-{k:06d}"
    by_dataset: dict[int, list[int]] = {}
    for i, sid in enumerate(ids):
        by_dataset.setdefault(dataset_of(sid), []).append(i)
    files: dict[str, dict[str, Any]] = {}
    written: list[tuple[Path, Path]] = []
    fields: dict[str, dict[str, Any]] = manifest["fields"]
    for d in sorted(by_dataset):
        name = names[d]
        folder = root / name
        folder.mkdir(exist_ok=True)
        final = folder / f"{stem}{SUFFIX[fmt]}"
        tmp = final.with_name(final.name + f"{_TMP}{os.getpid()}")
        chosen = [rows[i] for i in by_dataset[d]]
        where = f"dataset {name!r}, lane {lane}, shard {k}"
        known = fields.setdefault(name, {})
        for r in chosen:
            for field, value in r.items():
                kind = _field_kind(value)
                if kind is not None and known.setdefault(field, kind) != kind:
                    raise ConfigError(
                        f"{where}: field {field!r} is {kind} here but {known[field]} in earlier records: a field must keep one dtype"
                    )
        if fmt == "parquet":
            write_parquet(chosen, str(tmp), where)
        else:
            keys = [f"c{split_sample_id(ids[i])[0]:010d}o{split_sample_id(ids[i])[1]:05d}" for i in by_dataset[d]]
            write_webdataset(chosen, keys, str(tmp), where)
        written.append((tmp, final))
        files[name] = {"path": f"{name}/{final.name}", "records": len(chosen)}
    index = root / "index" / f"{stem}.npy"
    index.parent.mkdir(exist_ok=True)
    tmp_index = index.with_name(index.name + f"{_TMP}{os.getpid()}")
    with open(tmp_index, "wb") as f:
        np.save(f, np.asarray(ids, dtype=np.int64), allow_pickle=False)
    written.append((tmp_index, index))
    for tmp, final in written:
        os.replace(tmp, final)
    for entry in files.values():
        entry["sha256"] = _sha256(root / entry["path"])
    shard = {
        "shard": k,
        "records": len(rows),
        "files": files,
        "index": {"path": f"index/{index.name}", "sha256": _sha256(index), "records": len(ids)},
        "state": pipeline.state_dict(),
    }
    manifest["lane_shards"][str(lane)].append(shard)


__all__ = [
    "MANIFEST",
    "MaterializedSource",
    "Prefix",
    "Report",
    "is_materialized",
    "materialize",
    "prefix_of",
    "read_manifest",
    "read_materialized",
]
