"""The SHA-256 of a whole global batch, computed from the parts held by real ranks.

Elastic determinism is checked by comparing one digest per global step across runs on
different numbers of ranks. Each rank only holds its own lanes, so the arrays are gathered
(as ``.npz`` bytes, never pickle) and hashed with the kernel's
:func:`~zephon_core.hash_global_batch`, which concatenates every lane's microbatches in lane
order. The digest therefore equals the one the kernel's single-process harness computes for the
same step, and does not depend on how the batch was split over ranks or accumulation steps.
This sends every rank's batch to every rank: use it in tests and audits, not every step of a
large job.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

import numpy as np

from zephon_core import SampleBatch, hash_global_batch
from zephon_torch.collectives import all_gather_bytes
from zephon_torch.topology import DataParallelInfo


@dataclass(frozen=True, slots=True)
class LanePart:
    """One gathered microbatch: enough of a :class:`~zephon_core.SampleBatch` for hashing."""

    lane: int
    lane_index: int
    arrays: dict[str, np.ndarray]

    def to_training(self) -> dict[str, np.ndarray]:
        return self.arrays


def pack_parts(batches: Sequence[SampleBatch]) -> bytes:
    """This rank's microbatches (lane, lane index, training arrays) as ``.npz`` bytes."""
    arrays: dict[str, np.ndarray] = {
        "lanes": np.array([b.lane for b in batches], dtype=np.int64),
        "lane_indices": np.array([b.lane_index for b in batches], dtype=np.int64),
    }
    for i, b in enumerate(batches):
        for key, value in b.to_training().items():
            arrays[f"{i}/{key}"] = np.asarray(value)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def unpack_parts(blob: bytes) -> list[LanePart]:
    """Inverse of :func:`pack_parts` (refuses pickled objects)."""
    with np.load(io.BytesIO(blob), allow_pickle=False) as z:
        lanes, indices = z["lanes"], z["lane_indices"]
        parts: list[LanePart] = []
        for i, (lane, index) in enumerate(zip(lanes.tolist(), indices.tolist())):
            prefix = f"{i}/"
            arrays = {k[len(prefix) :]: z[k] for k in z.files if k.startswith(prefix)}
            parts.append(LanePart(lane, index, arrays))
    return parts


def gather_global_batch_hash(
    batches: Sequence[SampleBatch], info: DataParallelInfo, timeout: timedelta | None = None
) -> str:
    """Digest of the global batch whose local part is ``batches`` (a collective over the dp group)."""
    blobs = all_gather_bytes(pack_parts(batches), info, timeout, "global batch hash")
    return hash_global_batch([p for blob in blobs for p in unpack_parts(blob)])
