"""What happens when a dataset of a mixture runs out: the policies and the end-of-data report.

* ``"stop"``: the data ends at the draw that would take the dataset's first sample twice (the
  mixture stays exact to the end);
* ``"repeat"``: the dataset starts a new, freshly shuffled pass;
* ``"redistribute"``: the dataset leaves the mixture and its share goes to the others in
  proportion to their weights; the data ends when no dataset is left.

A policy is given for all datasets at once (``exhaustion="repeat"``) or per dataset
(``exhaustion={"web": "repeat", "code": "redistribute"}``). Every exhaustion is a pure function of
the configuration (and of trainer-steered updates, which are in the checkpoint), so the report of
who ran out where is the same on every run that reaches it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from zephon_core.errors import ConfigError

Policy = Literal["stop", "repeat", "redistribute"]
POLICIES: tuple[str, ...] = ("stop", "repeat", "redistribute")


def check_exhaustion(value: Any, names: Sequence[str], allowed: Sequence[str] = POLICIES) -> dict[str, Policy]:
    """One policy per dataset name, from a single policy or a ``{name: policy}`` dict naming every dataset."""
    if isinstance(value, str):
        value = dict.fromkeys(names, value)
    if not isinstance(value, Mapping):
        raise ConfigError(
            f"exhaustion must be one of {list(allowed)} or a dict of dataset name -> policy, got {value!r}"
        )
    if set(value) != set(names):
        raise ConfigError(f"exhaustion must name exactly the datasets {sorted(names)}, got {sorted(value)}")
    for name, policy in value.items():
        if policy not in allowed:
            raise ConfigError(f"exhaustion policy for {name!r} must be one of {list(allowed)}, got {policy!r}")
    return {n: value[n] for n in names}


def describe_exhaustion(policies: Mapping[str, str]) -> str | dict[str, str]:
    """The fingerprint value: one string when every dataset has the same policy."""
    distinct = set(policies.values())
    return next(iter(distinct)) if len(distinct) == 1 else dict(sorted(policies.items()))


@dataclass(frozen=True)
class Exhausted:
    """Dataset ``dataset`` ran out when it was due its draw number ``draw`` (0-based), at sample position
    ``position`` (global chunk ``chunk``); ``policy`` says what followed. ``lane`` is None for sources
    that mix globally (the static mixture), whose draws and positions are global; else draws and
    positions count within that lane."""

    lane: int | None
    dataset: str
    draw: int
    position: int
    chunk: int
    policy: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        ends = "the data ends" if self.lane is None else "the lane ends"
        then = {"stop": ends, "redistribute": "its share goes to the others"}.get(self.policy, self.policy)
        where = "global" if self.lane is None else f"lane {self.lane}"
        return (
            f"dataset {self.dataset!r} ran out at its draw {self.draw} ({where} position {self.position}, "
            f"chunk {self.chunk}); {then}"
        )
