"""One real data-parallel rank: ``python -m zephon_torch.testing.rank PARAMS.json`` with RANK and WORLD_SIZE set.

Joins a gloo process group (file:// store), builds the pipeline that ``params["pipeline"]`` names
(``"module:function"``, importable in the rank's interpreter), then performs the runs listed in the parameters,
each with a fresh pipeline and :class:`~zephon_torch.ZephonLoader`: optionally resume from a JSON
or ``torch.distributed.checkpoint`` checkpoint, iterate to the end of the data (or a step limit),
hash every global batch across ranks, save checkpoints at given steps. Writes what it saw as JSON;
a :class:`~zephon_torch.RankFailureError` is recorded (with how long it took) and ends the rank
with exit code 17, so the test can tell a clear failure from a crash or a hang.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp

from zephon_core import Pipeline
from zephon_torch import RankFailureError, ZephonLoader, load_checkpoint, save_checkpoint

EXIT_RANK_FAILURE = 17
"""Exit code of a rank that ended with a :class:`~zephon_torch.RankFailureError` (a peer died or hung)."""

DEFAULT_PIPELINE = "zephon_torch.testing.text:build"


def _write(path: Path, obj: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj))
    os.replace(tmp, path)


def load_factory(ref: str) -> Callable[[], Pipeline]:
    """The pipeline factory ``"module:function"`` names (a string: it travels in the JSON parameters)."""
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


def run_one(
    spec: dict[str, Any], build: Callable[[], Pipeline], timeout: timedelta, rank: int, progress: Path | None
) -> dict[str, Any]:
    """Perform one run of ``spec`` on a fresh pipeline and loader; returns what this rank saw."""
    dp_group = None
    if spec.get("mesh"):  # (dp, tp): ranks of one tensor-parallel replica must read the same data
        from torch.distributed.device_mesh import init_device_mesh

        dp_group = init_device_mesh("cpu", tuple(spec["mesh"]), mesh_dim_names=("dp", "tp"))["dp"]
    loader = ZephonLoader(build(), global_batch_size=spec.get("global_batch_size"), dp_group=dp_group, timeout=timeout)
    load = spec.get("load")
    if load and rank not in load.get("ranks", [rank]):
        load = None
    if load and "json" in load:
        loader.load_state_dict(load_checkpoint(load["json"]))
    elif load and "dcp" in load:
        dcp.load({"loader": loader}, checkpoint_id=load["dcp"])
    out: dict[str, Any] = {"hashes": [], "steps": [], "global_tokens": [], "lanes": [], "local": []}
    out["microbatches_per_step"] = loader.microbatches_per_step
    out["dp_rank"], out["dp_world_size"] = loader.info.rank, loader.info.world_size
    save_at = set(spec.get("save_at", []))
    save_every = spec.get("save_every")
    with loader:
        for step in loader:
            out["steps"].append(step.step)
            out["lanes"].append(step.lanes)
            out["local"].append([b.sha256() for b in step.batches])
            out["global_tokens"].append(step.global_num_tokens)
            out["hashes"].append(loader.global_batch_hash(step))
            assert all(isinstance(t, torch.Tensor) for mb in step for t in mb.values())
            done = step.step + 1  # global steps completed: where a checkpoint taken now resumes
            if done in save_at or (save_every and done % save_every == 0):
                save_checkpoint(loader, spec["save_json"].format(step=done))
                if spec.get("save_dcp"):
                    dcp.save({"loader": loader}, checkpoint_id=spec["save_dcp"].format(step=done))
            if progress is not None:
                _write(progress, {"step": done})
            if spec.get("sleep"):
                time.sleep(spec["sleep"])
            if spec.get("stop_after") and done >= spec["stop_after"]:
                break
        out["exhausted_locally"] = loader.exhausted_locally
        out["final_state_step"] = loader.step
    return out


def main() -> None:
    """Run every run of ``PARAMS.json`` (``sys.argv[1]``) as rank ``$RANK`` of ``$WORLD_SIZE``."""
    params = json.loads(Path(sys.argv[1]).read_text())
    t0 = time.monotonic()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    timeout = timedelta(seconds=params["timeout"])
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"file://{params['store']}", rank=rank, world_size=world, timeout=timeout
    )
    result_init = time.monotonic() - t0
    progress = Path(params["progress"].format(rank=rank)) if params.get("progress") else None
    result: dict[str, Any] = {"rank": rank, "world_size": world, "runs": {}, "error": None, "init_seconds": result_init}
    out_path = Path(params["out"].format(rank=rank))
    code = 0
    build = load_factory(params.get("pipeline", DEFAULT_PIPELINE))
    for spec in params["runs"]:
        started = time.monotonic()
        try:
            result["runs"][spec["name"]] = run_one(spec, build, timeout, rank, progress)
            result["runs"][spec["name"]]["seconds"] = time.monotonic() - started
        except RankFailureError as exc:
            result["error"] = {"type": type(exc).__name__, "message": str(exc), "seconds": time.monotonic() - started}
            code = EXIT_RANK_FAILURE
            break
        finally:
            _write(out_path, result)
    if code == 0:
        dist.destroy_process_group()
    sys.stdout.flush()
    os._exit(code)  # a dead peer can make gloo's shutdown block; the result is already written


if __name__ == "__main__":
    main()
