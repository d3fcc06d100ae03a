"""The comparison: the same packed rows through ``DataLoader`` + ``DistributedSampler``.

The rows are materialised once, offline (the first ``steps`` global batches of the Zephon
pipeline, so both loaders train on exactly the same rows). The standard loader then shards a
seeded permutation over ranks, ``perm[rank::world_size]``, and each rank reads ``global_batch /
world_size`` rows per step.

On resume it does what stateful samplers do (torchdata's ``StatefulDistributedSampler`` stores
exactly this): each rank skips the number of samples it had already yielded. That number is
per-rank, so on a different world size it points elsewhere in a differently sharded
permutation: with fewer ranks the job repeats rows it already trained on, with more it skips
rows it never saw. On the same world size it resumes exactly.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler

from zephon_core import Pipeline

FIELDS = ("input_ids", "labels", "position_ids", "document_ids", "num_valid_tokens")


def materialise(pipeline: Pipeline, steps: int, path: Path) -> int:
    """Write the rows of the pipeline's first ``steps`` global batches (one rank, lane order) to ``path``.

    Returns:
        The number of rows written.
    """
    lanes = pipeline.run_options.lanes
    rows: dict[str, list[np.ndarray]] = {k: [] for k in FIELDS}
    with pipeline.options(dp_rank=0, dp_world_size=1) as p:
        for i, batch in enumerate(p):
            if i == steps * lanes:
                break
            arrays = batch.to_training()
            for k in FIELDS:
                rows[k].append(arrays[k])
        else:
            raise SystemExit(f"the corpus holds fewer than {steps} global batches; use fewer --steps")
    out = {k: np.concatenate(v) for k, v in rows.items()}
    np.savez(path, **out)
    return len(out["input_ids"])


class PackedRows(Dataset):
    """Map-style dataset over the materialised rows (index -> one row, plus its index)."""

    def __init__(self, path: Path) -> None:
        with np.load(path) as z:
            self.arrays = {k: torch.from_numpy(z[k]) for k in FIELDS}

    def __len__(self) -> int:
        return len(self.arrays["input_ids"])

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {**{k: v[i] for k, v in self.arrays.items()}, "index": torch.tensor(i)}

    def rows_hash(self, indices: list[int]) -> str:
        """SHA-256 of a global batch taken as a set of rows (sorted), so order and sharding do not matter."""
        h = hashlib.sha256()
        idx = torch.tensor(sorted(indices))
        for k in FIELDS:
            h.update(k.encode())
            h.update(np.ascontiguousarray(self.arrays[k][idx].numpy()).tobytes())
        return h.hexdigest()


class ResumableDistributedSampler(DistributedSampler):
    """``DistributedSampler`` that skips the samples this rank already yielded (torchdata's approach)."""

    def __init__(self, dataset: Dataset, *, num_replicas: int, rank: int, seed: int, yielded: int = 0) -> None:
        super().__init__(dataset, num_replicas=num_replicas, rank=rank, shuffle=True, seed=seed, drop_last=True)
        self.yielded = yielded

    def __iter__(self) -> Iterator[int]:
        return iter(list(super().__iter__())[self.yielded :])

    def __len__(self) -> int:
        return self.num_samples - self.yielded


def standard_steps(
    dataset: PackedRows, *, rank: int, world: int, seed: int, microbatch: int, per_rank_rows: int, yielded: int
) -> Iterator[list[dict[str, torch.Tensor]]]:
    """This rank's microbatches, one list per global step (``per_rank_rows`` rows each), epoch after epoch.

    Starts in epoch 0 after ``yielded`` samples; when an epoch runs out, the next one starts with
    ``set_epoch`` (a new permutation), as a training loop over a ``DataLoader`` would.
    """
    per_step = per_rank_rows // microbatch
    epoch = 0
    while True:
        sampler = ResumableDistributedSampler(dataset, num_replicas=world, rank=rank, seed=seed, yielded=yielded)
        sampler.set_epoch(epoch)
        loader = DataLoader(dataset, batch_size=microbatch, sampler=sampler, num_workers=0, drop_last=True)
        step: list[dict[str, torch.Tensor]] = []
        for mb in loader:
            step.append(mb)
            if len(step) == per_step:
                yield step
                step = []
        epoch, yielded = epoch + 1, 0
