"""What happens when a dataset of a mixture runs out: the policies and the end-of-data report.

* ``"stop"``: the data ends at the draw that would take the dataset's first sample twice (the
  mixture stays exact to the end);
* ``"repeat"``: the dataset starts a new, freshly shuffled pass;
* ``"redistribute"``: the dataset leaves the mixture and its share goes to the others in
  proportion to their weights; the data ends when no dataset is left.

A policy is given for all datasets at once (``exhaustion="repeat"``) or per dataset
(``exhaustion={"web": "repeat", "code": "redistribute"}``). Passes can be bounded too (the static
source): ``max_repeats={"web": 2}`` lets a repeating dataset start at most 2 more passes, after which it
leaves the mixture as with ``"redistribute"``; ``stop_after_passes={"code": 3}`` ends the data when
``code`` would start its 4th pass; ``reshuffle_on_repeat=False`` reads every pass in the first pass's
order. Every exhaustion is a pure function of
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


def check_passes(value: Any, names: Sequence[str], what: str) -> dict[str, int]:
    """``max_repeats`` / ``stop_after_passes``: one int for every dataset, or a dict for some of them."""
    if value is None:
        return {}
    if isinstance(value, int) and not isinstance(value, bool):
        value = dict.fromkeys(names, value)
    if not isinstance(value, Mapping):
        raise ConfigError(f"{what} must be an int or a dict of dataset name -> int, got {value!r}")
    unknown = set(value) - set(names)
    if unknown:
        raise ConfigError(f"{what} names unknown datasets {sorted(unknown)} (datasets: {sorted(names)})")
    least = 0 if what == "max_repeats" else 1
    for name, n in value.items():
        if isinstance(n, bool) or not isinstance(n, int) or n < least:
            raise ConfigError(f"{what}[{name!r}] must be an int >= {least}, got {n!r}")
    return {n: int(value[n]) for n in names if n in value}


def check_reshuffle(value: Any, names: Sequence[str]) -> dict[str, bool]:
    """``reshuffle_on_repeat``: one bool, or a dict of dataset name -> bool (others default to True)."""
    if isinstance(value, bool):
        return dict.fromkeys(names, value)
    if not isinstance(value, Mapping) or not all(isinstance(v, bool) for v in value.values()):
        raise ConfigError(f"reshuffle_on_repeat must be a bool or a dict of dataset name -> bool, got {value!r}")
    unknown = set(value) - set(names)
    if unknown:
        raise ConfigError(f"reshuffle_on_repeat names unknown datasets {sorted(unknown)} (datasets: {sorted(names)})")
    return {n: bool(value.get(n, True)) for n in names}


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
    passes: int = 1
    """Complete passes over the dataset when it ran out (1 unless it repeated)."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        ends = "the data ends" if self.lane is None else "the lane ends"
        then = {"stop": ends, "redistribute": "its share goes to the others"}.get(self.policy, self.policy)
        where = "global" if self.lane is None else f"lane {self.lane}"
        passes = f" after {self.passes} passes" if self.passes != 1 else ""
        return (
            f"dataset {self.dataset!r} ran out{passes} at its draw {self.draw} ({where} position {self.position}, "
            f"chunk {self.chunk}); {then}"
        )
