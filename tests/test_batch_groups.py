"""The batch stage's groups: the microbatches cut from one message travel as one task and one hop.

What must hold besides speed: a collation failure still names the samples of the microbatch that
failed (not the whole group's), rows are still copied whenever a step after fetch may change them,
and a group is one task of the batch stage (the per-hop costs are paid once per group).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from zephon_core import Dataset, Pipeline, StaticMixtureWorkSource
from zephon_core.errors import OperatorError
from zephon_core.runtime.batch import default_collate


def _source(n: int = 256, chunk: int = 128) -> StaticMixtureWorkSource:
    return StaticMixtureWorkSource(
        [Dataset.from_records("d", [{"x": i} for i in range(n)], shard_size=64)], chunk_size=chunk, seed=5
    )


def collate_failing_on_seven(rows: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """A collation that fails (with no row index) on the microbatch holding record 7."""
    if any(r["x"] == 7 for r in rows):
        raise ValueError("cannot collate this microbatch")
    return default_collate(rows)


def collate_changing_rows(rows: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """A collation that changes the rows it is given (allowed: they are the pipeline's copies)."""
    out = default_collate(rows)
    for r in rows:
        r["x"] = -1
    return out


def change_row(row: dict[str, Any]) -> dict[str, Any]:
    row["x"] += 1000  # changes its input in place, then returns it
    return row


def test_a_collation_failure_in_a_group_names_only_its_microbatch() -> None:
    # One lane, 128-record chunks, microbatches of 8: each message is two groups of 8 microbatches.
    p = Pipeline(_source()).batch(8, collate=collate_failing_on_seven).options(lanes=1, runner="inline")
    with pytest.raises(OperatorError) as err, p:
        list(p)
    msg = str(err.value)
    assert "cannot collate this microbatch" in msg, msg
    assert "and 5 more" in msg, msg  # the microbatch's 8 samples, not the group's 64 ("and 61 more")


@pytest.mark.parametrize("step", ["collate", "map_transform"])
def test_rows_are_copied_when_a_step_may_change_them(step: str) -> None:
    source = _source()

    def run() -> list[np.ndarray]:
        p = Pipeline(source)
        if step == "map_transform":
            p = p.map_transform(change_row).batch(8)
        else:
            p = p.batch(8, collate=collate_changing_rows)
        with p.options(lanes=1, runner="threads") as it:
            return [b.data["x"] for b in it]

    first, second = run(), run()  # the same Dataset object: a changed stored row would show in the second run
    assert len(first) == 32
    assert all(np.array_equal(a, b) for a, b in zip(first, second, strict=True))
    shift = 1000 if step == "map_transform" else 0
    assert sorted(int(v) for a in second for v in a) == [i + shift for i in range(256)]


def test_the_microbatches_of_one_message_are_one_task() -> None:
    p = Pipeline(_source(512)).batch(8).options(lanes=1, runner="threads")
    with p:
        n = sum(1 for _ in p)
        batch = next(s for s in p.metrics()["stages"] if s["name"] == "batch")
    assert n == 64
    assert batch["tasks"] <= 16, batch  # 4 messages of 128 rows: 8 groups (one task per microbatch: 64)
    assert batch["records_out"] == 512
