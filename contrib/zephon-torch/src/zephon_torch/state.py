"""The loader's ``state_dict`` layout, chosen so ``torch.distributed.checkpoint`` resumes it elastically.

The kernel's per-rank state is plain JSON: shared fields (schema, pipeline fingerprint and
definition, source state) plus one entry per lane the rank owns. The loader exposes it as::

    {"meta": "<JSON of the shared fields>", "lanes": {"0": "<JSON of lane 0>", "1": ...}}

Why this shape:

* ``torch.distributed.checkpoint`` (DCP) flattens nested dicts into keys such as
  ``dataloader.lanes.3`` and de-duplicates equal keys across ranks. A lane lives on exactly one
  rank, so every lane is written once; ``meta`` is identical on every rank and is written once.
* On load, each rank of a *new* world size asks DCP for exactly the lanes it now owns, wherever
  they were written, which is what makes resuming on another number of ranks work.
* Each leaf is one JSON string, so DCP never has to interpret nested lists, and the same dict
  also survives ``torch.save``, ``json.dump`` and trainer checkpoints unchanged.

Nothing rank-specific (rank, world size, round-robin position) is stored: a lane's ``delivered``
count determines where a rank resumes, whatever the new topology.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from zephon_core import CheckpointError

_RANK_FIELDS = ("lanes", "rank", "world_size", "multiplexer")


def _dumps(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def to_loader_state(kernel_state: Mapping[str, Any]) -> dict[str, Any]:
    """A kernel checkpoint (one rank's or merged) in the loader's DCP-friendly layout."""
    meta = {k: v for k, v in kernel_state.items() if k not in _RANK_FIELDS}
    lanes = {str(k): _dumps(v) for k, v in kernel_state["lanes"].items()}
    return {"meta": _dumps(meta), "lanes": lanes}


def is_kernel_state(state: Mapping[str, Any]) -> bool:
    """Whether ``state`` is in the kernel's layout (e.g. from ``merge_checkpoints`` or a JSON file)."""
    return "schema" in state


def to_kernel_state(state: Mapping[str, Any]) -> dict[str, Any]:
    """The kernel checkpoint held by ``state`` (either layout), ready for ``Pipeline.load_state_dict``.

    Raises:
        CheckpointError: ``state`` is neither layout or its JSON is damaged.
    """
    if not isinstance(state, Mapping):
        raise CheckpointError(f"a loader state must be a dict, got {type(state).__name__}")
    if is_kernel_state(state):
        return dict(state)
    if "meta" not in state or "lanes" not in state:
        raise CheckpointError(
            f"not a zephon loader state: expected keys 'meta' and 'lanes' (or a kernel checkpoint with "
            f"'schema'), got {sorted(state)[:8]}"
        )
    try:
        meta = json.loads(state["meta"])
        lanes = {str(k): json.loads(v) for k, v in dict(state["lanes"]).items()}
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"zephon loader state holds invalid JSON: {exc}") from None
    if not isinstance(meta, dict):
        raise CheckpointError("zephon loader state: 'meta' must hold a JSON object")
    return {**meta, "lanes": lanes, "world_size": None}


def step_of(kernel_state: Mapping[str, Any], rounds_per_step: int) -> int:
    """The global step a checkpoint was taken at, derived from the lanes' delivered microbatches.

    At a global-step boundary every lane has delivered ``step * rounds_per_step`` microbatches. A
    state where lanes disagree was cut inside a step (on some rank), which would make the next
    global batches depend on the topology, so it is refused.

    Raises:
        CheckpointError: lanes disagree, or the count is not a whole number of steps.
    """
    delivered = {int(k): int(v["delivered"]) for k, v in kernel_state["lanes"].items()}
    if not delivered:
        return 0
    counts = set(delivered.values())
    if len(counts) != 1:
        raise CheckpointError(
            f"checkpoint was not taken at a global-step boundary: lanes delivered different numbers of "
            f"microbatches {delivered}. Take checkpoints between steps, on every rank (ZephonLoader.state_dict "
            "or gather_checkpoint after a whole GlobalStep)"
        )
    (count,) = counts
    if count % rounds_per_step:
        raise CheckpointError(
            f"checkpoint lanes delivered {count} microbatches each, not a multiple of {rounds_per_step} "
            "microbatches per lane per global step: it was taken with another global_batch_size"
        )
    return count // rounds_per_step
