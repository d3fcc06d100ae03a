"""Per-rank checkpoint files, for trainers without a process group (JAX, custom launchers).

Each rank writes its own state, nobody gathers: ``<root>/step-<N>/rank-<r>-of-<w>.json``
(:func:`save_rank_state`). A step is *complete* when all ``w`` files exist (each appears atomically,
so they are also whole); :func:`load_merged_state` merges the latest complete step."""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
import uuid
from collections.abc import Mapping
from typing import Any

from zephon_core.checkpoint.merge import merge_checkpoints
from zephon_core.errors import CheckpointError
from zephon_core.work.lanes import is_int

RANK_FILE_FORMAT = "zephon-rank-state"
_STEP_DIR = re.compile(r"^step-(\d+)$")
_RANK_FILE = re.compile(r"^rank-(\d+)-of-(\d+)\.json$")
_OBJECT_STORES = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "oss", "r2", "memory"})
"""fsspec protocols whose single-object write is atomic (readers see the whole object or none)."""


def _fs(url_or_dir: str | os.PathLike[str], storage_options: Mapping[str, Any] | None) -> tuple[Any, str]:
    from fsspec.core import url_to_fs

    fs, root = url_to_fs(os.fspath(url_or_dir), **dict(storage_options or {}))
    return fs, root.rstrip("/")


def rank_state_path(root: str, step: int, rank: int, world_size: int) -> str:
    """Where rank ``rank`` of ``world_size`` keeps its state of ``step`` under ``root``."""
    return f"{root}/step-{step}/rank-{rank}-of-{world_size}.json"


def save_rank_state(
    url_or_dir: str | os.PathLike[str],
    state: Mapping[str, Any],
    rank: int,
    world_size: int,
    *,
    step: int,
    storage_options: Mapping[str, Any] | None = None,
) -> str:
    """Write this rank's ``pipeline.state_dict()`` as JSON, atomically, and return the path written. No
    collective, no torch: every rank calls it at the same global step. Atomic by ``os.replace`` of an
    ``fsync``-ed hidden temporary file locally, one PUT on object stores (``s3://``, ``gs://``,
    ``az://``, ``memory://``: no rename), else ``fs.mv`` of a temporary file (atomic if a rename: HDFS).

    Args:
        url_or_dir: a local folder or fsspec URL, the ``<root>`` of the module docstring's layout.
        state: this rank's state: plain JSON data, never pickled.
        step: the training step the state was taken after (names the folder).
        storage_options: fsspec options (credentials, endpoint).

    Raises:
        CheckpointError: bad rank/world size/step, or the state is not JSON-serialisable."""
    for name, value, low in (("rank", rank, 0), ("world_size", world_size, 1), ("step", step, 0)):
        if not is_int(value) or value < low:
            raise CheckpointError(f"save_rank_state: {name} must be an int >= {low}, got {value!r}")
    if rank >= world_size:
        raise CheckpointError(f"save_rank_state: rank {rank} is not below world_size {world_size}")
    if not isinstance(state, Mapping):
        raise CheckpointError(f"save_rank_state: state must be a dict, got {type(state).__name__}")
    record = {"format": RANK_FILE_FORMAT, "step": step, "rank": rank, "world_size": world_size, "state": state}
    try:
        data = json.dumps(record, sort_keys=True, allow_nan=False).encode()
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"rank {rank}'s state is not plain JSON data (pickle is never used): {exc}") from None
    fs, root = _fs(url_or_dir, storage_options)
    path = rank_state_path(root, step, rank, world_size)
    protocols = set(fs.protocol) if isinstance(fs.protocol, (tuple, list)) else {fs.protocol}
    if "file" in protocols or "local" in protocols:
        _write_local_atomic(path, data)
    elif protocols & _OBJECT_STORES:
        fs.pipe_file(path, data)
    else:
        tmp = f"{root}/step-{step}/.rank-{rank}-of-{world_size}.json.{uuid.uuid4().hex[:8]}.tmp"
        fs.makedirs(f"{root}/step-{step}", exist_ok=True)
        fs.pipe_file(tmp, data)
        fs.mv(tmp, path)
    return path


def _write_local_atomic(path: str, data: bytes) -> None:
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; checkpoints are read by other jobs
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # make the rename itself durable
        dfd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def _scan(fs: Any, root: str) -> dict[int, dict[int, set[int]]]:
    """``{step: {world_size: {ranks with a file}}}`` under ``root`` (temporary files ignored)."""
    with contextlib.suppress(Exception):
        fs.invalidate_cache(root)
    found: dict[int, dict[int, set[int]]] = {}
    for entry in _ls(fs, root):
        if m := _STEP_DIR.match(entry.rstrip("/").rsplit("/", 1)[-1]):
            for f in _ls(fs, entry):
                if fm := _RANK_FILE.match(f.rsplit("/", 1)[-1]):
                    found.setdefault(int(m.group(1)), {}).setdefault(int(fm.group(2)), set()).add(int(fm.group(1)))
    return found


def _ls(fs: Any, path: str) -> list[str]:
    try:
        return list(fs.ls(path, detail=False))
    except FileNotFoundError:
        return []


def _complete_world(per_world: Mapping[int, set[int]]) -> int | None:
    return max((w for w, ranks in per_world.items() if set(range(w)) <= ranks), default=None)


def load_merged_state(
    url_or_dir: str | os.PathLike[str], step: int | None = None, *, storage_options: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Read every rank's file of one step and merge them (:func:`merge_checkpoints`) into a checkpoint
    that ``pipeline.load_state_dict`` takes on any world size dividing the lanes.

    Args:
        url_or_dir: where :func:`save_rank_state` wrote.
        step: the step to load; ``None``: the latest *complete* one (every rank wrote its file).
        storage_options: fsspec options.

    Raises:
        CheckpointError: no complete step, an incomplete one requested, files disagreeing on step or
            world size, or states taken at different global steps (naming the ranks and steps)."""
    fs, root = _fs(url_or_dir, storage_options)
    found = _scan(fs, root)
    if step is None:
        chosen = next((s for s in sorted(found, reverse=True) if _complete_world(found[s]) is not None), None)
        if chosen is None:
            detail = {s: {w: sorted(r) for w, r in ws.items()} for s, ws in sorted(found.items())}
            raise CheckpointError(
                f"no complete checkpoint step under {url_or_dir}: a step is complete when every rank of its world "
                f"size wrote its file (found {{step: {{world_size: ranks}}}} = {detail})"
            )
        step = chosen
    world = _complete_world(found.get(step, {}))
    if world is None:
        have = {w: sorted(r) for w, r in found.get(step, {}).items()}
        latest = {
            f"rank {r} of {w}": max(s for s, ws in found.items() if r in ws.get(w, set()))
            for w in found.get(step, {})
            for r in range(w)
            if any(r in ws.get(w, set()) for ws in found.values())
        }
        raise CheckpointError(
            f"checkpoint step {step} under {url_or_dir} is incomplete: rank files present {have or 'none'} "
            f"({{world_size: ranks}}); latest step each rank saved: {latest or 'none'}"
        )
    states: list[Mapping[str, Any]] = []
    problems = []
    for rank in range(world):
        path = rank_state_path(root, step, rank, world)
        try:
            record = json.loads(fs.cat_file(path))
        except (OSError, ValueError) as exc:
            raise CheckpointError(f"cannot read rank {rank}'s checkpoint file {path}: {exc}") from None
        if not isinstance(record, dict) or record.get("format") != RANK_FILE_FORMAT:
            raise CheckpointError(f"{path} is not a zephon rank state file (written by save_rank_state)")
        if (record.get("step"), record.get("world_size"), record.get("rank")) != (step, world, rank):
            problems.append(
                f"rank {record.get('rank')} of {record.get('world_size')} at step {record.get('step')} "
                f"(file {path} names rank {rank} of {world} at step {step})"
            )
        states.append(record.get("state") or {})
    if problems:
        raise CheckpointError(f"rank files of step {step} disagree on step or world size: {'; '.join(problems)}")
    return merge_checkpoints(states)
