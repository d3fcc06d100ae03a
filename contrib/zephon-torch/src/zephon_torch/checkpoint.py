"""One global checkpoint from every rank's lanes, and a JSON file to keep it in.

Each rank's ``state_dict()`` covers only its own lanes. To resume on a different number of
ranks, every lane must be available to whichever rank owns it next. Two ways:

* ``torch.distributed.checkpoint``: put the loader in the state dict; its layout (see
  :mod:`zephon_torch.state`) lets DCP do the gathering;
* :func:`gather_checkpoint`: an all-gather of the ranks' JSON states merged with the kernel's
  :func:`~zephon_core.merge_checkpoints`, so every rank holds the whole (small) checkpoint and
  one of them writes it with :func:`save_checkpoint`.

Both must run on every rank at the same global-step boundary (they are collectives).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from zephon_core import CheckpointError, ConfigError, merge_checkpoints
from zephon_torch.collectives import all_gather_bytes, all_reduce_sum
from zephon_torch.errors import RankFailureError
from zephon_torch.loader import ZephonLoader


def gather_checkpoint(loader: ZephonLoader) -> dict[str, Any]:
    """Every data-parallel rank's lanes merged into one checkpoint, returned on every rank.

    A collective over the loader's data-parallel group: call it on every rank after the same
    global step. The result restores on any data-parallel size that divides the lanes, via
    ``loader.load_state_dict(state)``.

    Raises:
        ConfigError: several data-parallel ranks but no process group to gather over.
        CheckpointError: the ranks' states belong to different pipelines or overlap.
        RankFailureError: a rank did not answer within the loader's timeout.
    """
    if loader.info.world_size > 1 and not loader.info.distributed:
        raise ConfigError(
            f"gather_checkpoint needs torch.distributed to reach the other {loader.info.world_size - 1} rank(s): "
            "initialise a process group, or save each rank's loader.state_dict() and join them with "
            "zephon_core.merge_checkpoints"
        )
    mine = json.dumps(loader.kernel_state_dict(), sort_keys=True).encode()
    blobs = all_gather_bytes(mine, loader.info, loader.timeout, f"checkpoint gather at global step {loader.step}")
    merged = merge_checkpoints([json.loads(b) for b in blobs])
    if len(merged["lanes"]) != loader.lanes:
        missing = sorted(set(range(loader.lanes)) - {int(k) for k in merged["lanes"]})
        raise CheckpointError(
            f"gathered checkpoint lacks lanes {missing}: call gather_checkpoint on every data-parallel rank"
        )
    return merged


def save_checkpoint(loader: ZephonLoader, path: str | os.PathLike[str]) -> dict[str, Any]:
    """Gather the global checkpoint and write it as JSON (atomically, by global rank 0).

    Ends with a barrier that also carries whether the write succeeded, so no rank continues
    believing in a checkpoint that does not exist.

    Returns:
        The merged checkpoint (on every rank).
    """
    merged = gather_checkpoint(loader)
    ok = 1
    error = ""
    if loader.info.global_rank == 0:
        try:
            write_json_atomic(merged, Path(path))
        except OSError as exc:
            ok, error = 0, str(exc)
    writers_ok = all_reduce_sum([ok], loader.info, loader.timeout, f"checkpoint write at global step {loader.step}")[0]
    expected = loader.info.world_size if loader.info.distributed else 1
    if error or writers_ok < expected:
        raise RankFailureError(f"writing the checkpoint {path} failed on global rank 0 {error}".rstrip())
    return merged


def load_checkpoint(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a checkpoint written by :func:`save_checkpoint` (pass it to ``loader.load_state_dict``)."""
    try:
        state = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"cannot read zephon checkpoint {path}: {exc}") from None
    if not isinstance(state, dict):
        raise CheckpointError(f"zephon checkpoint {path} does not hold a JSON object")
    return state


def write_json_atomic(obj: Any, path: Path) -> None:
    """Write ``obj`` as JSON next to ``path`` and rename it into place, so readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(obj, f, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; a checkpoint is read by other jobs and users
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
