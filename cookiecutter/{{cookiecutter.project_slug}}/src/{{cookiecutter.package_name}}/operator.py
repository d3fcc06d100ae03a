"""{{ cookiecutter.class_name }}: drop documents whose text repeats within a lane's window.

The accumulator decides (it sees every record of its lane in order and remembers digests of what it
has let through); the worker does the expensive part (normalising the text) on parallel workers.
Dropped records leave a tombstone so Zephon can account for every input sample. At a flush
sentinel the accumulator is discarded and the lane starts from a fresh, empty memory.
"""

from __future__ import annotations

import hashlib
import unicodedata
from dataclasses import dataclass
from typing import Any

from zephon_core import Accumulator, Operator, Records, Traits, Work
from zephon_core.plugin_api import apply_each


def _digest(text: str) -> str:
    return hashlib.blake2b(" ".join(text.split()).lower().encode(), digest_size=12).hexdigest()


class _Seen(Accumulator):
    """Per-lane state: digests of the documents kept since the last flush."""

    def __init__(self, field: str) -> None:
        self.field = field
        self.seen: dict[str, int] = {}

    def push(self, records: Records) -> list[Any]:
        work = Work([], [], [], list(records.dropped))
        for payload, key, lineage in zip(records.payloads, records.keys, records.lineage):
            d = _digest(payload[self.field])
            if d in self.seen:
                work.dropped.append(lineage)  # a tombstone keeps lineage whole
                continue
            self.seen[d] = len(self.seen)
            work.task.append(payload)
            work.keys.append(key)
            work.lineage.append(lineage)
        return [work] if (work.keys or work.dropped) else []

    def state(self) -> Any:
        return {"seen": sorted(self.seen)}


@dataclass(frozen=True)
class _Normalise:
    """The worker: a pure, picklable function of its input."""

    field: str

    def __call__(self, payloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return apply_each(self.one, payloads)

    def one(self, payload: dict[str, Any]) -> dict[str, Any]:
        cleaned = " ".join(unicodedata.normalize("NFKC", payload[self.field]).split())
        return {**payload, self.field: cleaned}


class {{ cookiecutter.class_name }}(Operator):
    """Drop repeated documents (by normalised text) within each lane window.

    Args:
        field: the text field to compare.
        parallelism: workers for the normalisation.
    """

    kind = "{{ cookiecutter.name }}"
    traits = Traits(fanout="one", stateful=True)

    def __init__(self, field: str = "text", parallelism: int = 1, runner: str | None = None) -> None:
        super().__init__(parallelism=parallelism, runner=runner)
        self.field = field

    def config(self) -> dict[str, Any]:
        return {"field": self.field}

    def new_accumulator(self, lane: int) -> Accumulator:
        return _Seen(self.field)

    def worker(self) -> Any:
        return _Normalise(self.field)
