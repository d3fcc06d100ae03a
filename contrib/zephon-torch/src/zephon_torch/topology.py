"""Which data-parallel rank this process is, and which process group it agrees with.

Zephon splits lanes over *data-parallel* ranks, not over all processes: with tensor or pipeline
parallelism, the processes of one model replica must read the same data, so the rank that picks
the lanes is the rank inside the data-parallel group. Without a process group (a single process,
or a launcher that only sets ``RANK``/``WORLD_SIZE``) the loader still works, but cannot run the
cross-rank checks and the end-of-data agreement.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch.distributed as dist

from zephon_core import ConfigError


@dataclass(frozen=True, slots=True)
class DataParallelInfo:
    """This process's place among the data-parallel ranks.

    Attributes:
        rank: rank inside the data-parallel group (selects the lanes).
        world_size: number of data-parallel ranks (must divide the pipeline's lanes).
        group: the process group used for the loader's collectives; ``None`` means the default
            group when ``distributed`` is true.
        distributed: whether a process group is available for collectives.
        global_rank: rank in the default group (``rank`` when there is none); writes files.
    """

    rank: int
    world_size: int
    group: Any = None
    distributed: bool = False
    global_rank: int = 0


def _env_int(name: str) -> int | None:
    value = os.environ.get(name)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise ConfigError(f"environment variable {name}={value!r} is not an integer") from None


def _as_group(dp_group: Any) -> Any:
    """Accept a ``ProcessGroup`` or a 1-D ``DeviceMesh`` (``mesh["dp"]``), as torchtitan passes either."""
    get_group = getattr(dp_group, "get_group", None)
    return get_group() if callable(get_group) else dp_group


def resolve_data_parallel(
    dp_group: Any = None, dp_rank: int | None = None, dp_world_size: int | None = None
) -> DataParallelInfo:
    """Find the data-parallel rank and size, in this order of preference.

    1. ``dp_group`` given: rank and size inside that group (tensor/pipeline parallel setups).
    2. ``torch.distributed`` initialised: the default group.
    3. ``RANK`` / ``WORLD_SIZE`` in the environment (no collectives).
    4. A single rank.

    Explicit ``dp_rank`` / ``dp_world_size`` override the discovered values but must agree with a
    group when there is one, because a mismatch would silently feed two replicas the same lanes.

    Raises:
        ConfigError: the values are inconsistent, or ``dp_group`` is given without a process group.
    """
    if dp_group is not None:
        if not (dist.is_available() and dist.is_initialized()):
            raise ConfigError("dp_group was given but torch.distributed is not initialised: call init_process_group")
        group = _as_group(dp_group)
        rank = dist.get_rank(group)
        if rank < 0:
            raise ConfigError(
                f"this process (global rank {dist.get_rank()}) is not a member of the given dp_group: "
                "pass the data-parallel group that contains this process"
            )
        info = DataParallelInfo(rank, dist.get_world_size(group), group, True, dist.get_rank())
    elif dist.is_available() and dist.is_initialized():
        info = DataParallelInfo(dist.get_rank(), dist.get_world_size(), None, True, dist.get_rank())
    else:
        env_rank, env_world = _env_int("RANK"), _env_int("WORLD_SIZE")
        rank = env_rank if env_rank is not None else 0
        world = env_world if env_world is not None else 1
        info = DataParallelInfo(rank, world, None, False, rank)
    if dp_rank is not None or dp_world_size is not None:
        rank = info.rank if dp_rank is None else dp_rank
        world = info.world_size if dp_world_size is None else dp_world_size
        if info.distributed and (rank, world) != (info.rank, info.world_size):
            where = "dp_group" if dp_group is not None else "the default process group"
            raise ConfigError(
                f"dp_rank={dp_rank}, dp_world_size={dp_world_size} disagree with {where} "
                f"(rank {info.rank} of {info.world_size}); with tensor or pipeline parallelism pass the "
                "data-parallel group as dp_group instead of explicit ranks"
            )
        info = DataParallelInfo(rank, world, info.group, info.distributed, info.global_rank)
    if not isinstance(info.world_size, int) or info.world_size < 1:
        raise ConfigError(f"data-parallel world size must be an int >= 1, got {info.world_size!r}")
    if not isinstance(info.rank, int) or not 0 <= info.rank < info.world_size:
        raise ConfigError(f"data-parallel rank {info.rank!r} is out of range for world size {info.world_size}")
    return info
