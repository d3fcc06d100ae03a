"""The rules an operator or reader must follow, and what an implementation claims to support.

Every failing check names its rule (e.g. ``[rule 4: flush resets the lane]``), so a failure says
what to fix, not just that two hashes differ.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

RULES = {
    1: "worker is a pure function",
    2: "state is per lane and plain data",
    3: "randomness comes from the data",
    4: "flush resets the lane",
    5: "lineage is exact and conserved",
    6: "output does not depend on grouping",
    7: "resume equals the uninterrupted run",
    8: "reader is deterministic and safe",
    9: "bad input is a clear error",
}


def rule(n: int) -> str:
    """The tag a failure message starts with."""
    return f"[rule {n}: {RULES[n]}]"


@dataclass(frozen=True)
class Capabilities:
    """What an operator claims. A check for an unclaimed feature is reported as a skip.

    Attributes:
        processes: the worker can run on the processes runner (it pickles).
        resets_on_flush: the operator returns to a fresh state at each flush (all but ``batch``).
        json_state: ``Accumulator.state()`` returns JSON-compatible data.
        subprocess_factory: the operator factory can be re-created in a fresh interpreter.
        exact_lineage: each output's lineage names only the inputs whose data it holds. Without
            it the suite still requires every contributing input to be named (a sound superset,
            e.g. ``stateful_transform`` with bare items instead of ``Emit``), but not that each
            named input contributed.
    """

    processes: bool = True
    resets_on_flush: bool = True
    json_state: bool = True
    subprocess_factory: bool = True
    exact_lineage: bool = True


@dataclass(frozen=True)
class ReaderCapabilities:
    """What a reader claims.

    Attributes:
        shard_files: ``ShardInfo.id`` is a file path relative to the dataset root (so the suite
            can delete, truncate and corrupt shards).
        detects_corruption: corrupt bytes inside a shard raise an error rather than decode.
        memory_fs: the reader works on fsspec ``memory://`` URLs.
        processes: the reader pickles and reads from other processes.
    """

    shard_files: bool = True
    detects_corruption: bool = True
    memory_fs: bool = True
    processes: bool = True


class SuiteBase:
    """Base of the suite's test classes: not collected by pytest until a subclass exists."""

    __test__ = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__test__" not in cls.__dict__:
            cls.__test__ = True
