"""One real rank iterating ``StatefulDataLoader(to_torch_dataset(...))``: ``python -m zephon_torch.testing.dataset_rank``.

Started by :func:`~zephon_torch.testing.ranks.launch` (``module=`` this one) with RANK and WORLD_SIZE
set. Joins a gloo process group (the dataset finds its data-parallel rank there), optionally loads a
StatefulDataLoader state (JSON), iterates, saves its own ``state_dict()`` as JSON after
``save_after`` microbatches, and at the end all-gathers every rank's microbatches so rank 0 can hash
the global batches with :func:`hash_steps`.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

from zephon_core import hash_global_batch


@dataclass(frozen=True)
class _Microbatch:
    """What :func:`~zephon_core.hash_global_batch` reads from a ``SampleBatch``."""

    lane: int
    lane_index: int
    arrays: dict[str, np.ndarray]

    def to_training(self) -> dict[str, np.ndarray]:
        return self.arrays


def hash_steps(per_rank: Sequence[Sequence[dict[str, Any]]], lanes: int) -> list[str]:
    """Global-batch hashes of microbatches yielded by ``to_torch_dataset`` on each rank of ``len(per_rank)``.

    Each rank hands out one microbatch per owned lane per round, lowest lane first, starting at a
    round boundary (a fresh start or a state merged at a global-step boundary); a global step is one
    round of every rank. Values may be tensors or arrays.
    """
    world = len(per_rank)
    per = lanes // world
    steps = min(len(mbs) for mbs in per_rank) // per
    out = []
    for t in range(steps):
        batch = [
            _Microbatch(r * per + j, t, {k: np.asarray(v) for k, v in per_rank[r][t * per + j].items()})
            for r in range(world)
            for j in range(per)
        ]
        out.append(hash_global_batch(batch))
    return out


def main() -> None:
    import torch
    import torch.distributed as dist
    from torchdata.stateful_dataloader import StatefulDataLoader

    from zephon_torch import to_torch_dataset
    from zephon_torch.testing.rank import load_factory

    params = json.loads(Path(sys.argv[1]).read_text())
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo",
        init_method=f"file://{params['store']}",
        rank=rank,
        world_size=world,
        timeout=timedelta(seconds=params["timeout"]),
    )
    build = load_factory(params["pipeline"])
    result: dict[str, Any] = {"rank": rank, "runs": {}}
    for spec in params["runs"]:
        ds = to_torch_dataset(build)
        dl = StatefulDataLoader(ds, batch_size=None)
        if spec.get("load"):
            dl.load_state_dict(json.loads(Path(spec["load"]).read_text()))
        got = []
        for mb in dl:
            assert all(isinstance(t, torch.Tensor) for t in mb.values())
            got.append({k: t.numpy().copy() for k, t in mb.items()})
            if spec.get("save_after") and len(got) == spec["save_after"]:
                Path(spec["save"].format(rank=rank)).write_text(json.dumps(dl.state_dict()))
        ds.close()
        everyone: list[Any] = [None] * world
        dist.all_gather_object(everyone, got)
        run = {"microbatches": len(got)}
        if rank == 0:
            run["hashes"] = hash_steps(everyone, ds.pipeline.run_options.lanes)
        result["runs"][spec["name"]] = run
    Path(params["out"].format(rank=rank)).write_text(json.dumps(result))
    dist.destroy_process_group()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
