"""zephon-curricula installed alone, with only its declared dependencies, in a fresh virtual environment:
a scheduled, trainer-steered pipeline runs and resumes, and the kernel's former names resolve here."""

from __future__ import annotations

from pathlib import Path

import pytest
from zephon_testkit.isolated import check_alone

SCRIPT = r"""
import itertools, sys
import zephon_curricula
from zephon_core import Dataset, MixtureSchedule, Pipeline, ScheduledMixtureWorkSource, hash_global_batch
from zephon_core.work.scheduled import ScheduledMixtureWorkSource as Former

assert ScheduledMixtureWorkSource is Former is zephon_curricula.ScheduledMixtureWorkSource
assert MixtureSchedule is zephon_curricula.MixtureSchedule


def build():
    web = Dataset.from_records("web", [{"x": i} for i in range(800)], 100)
    code = Dataset.from_records("code", [{"x": -i} for i in range(400)], 100)
    schedule = MixtureSchedule([(0, {"web": 0.8, "code": 0.2}), (200, {"web": 0.4, "code": 0.6})])
    source = ScheduledMixtureWorkSource([web, code], schedule=schedule, chunk_size=8, seed=5)
    return Pipeline(source).batch(4).options(lanes=2, runner="inline", flush_every_k_chunks=2)


def steps(p, n):
    it = iter(p)
    return [hash_global_batch(list(itertools.islice(it, 2))) for _ in range(n)]


with build() as p:
    head = steps(p, 3)
    p.update_mixture({"web": 0.1, "code": 0.9})
    tail = steps(p, 6)
with build() as p:
    steps(p, 3)
    p.update_mixture({"web": 0.1, "code": 0.9})
    steps(p, 2)
    state = p.state_dict()
with build() as p:
    p.load_state_dict(state)
    assert steps(p, 4) == tail[2:], "the resumed run differs"
assert state["definition"]["source"]["type"] == "ScheduledMixtureWorkSource"
for heavy in ("pyarrow", "torch"):
    assert heavy not in sys.modules, heavy
print("ALONE OK")
"""


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_installed_alone(tmp_path: Path) -> None:
    python = check_alone("zephon-curricula", tmp_path, SCRIPT, present={"numpy"}, absent={"pyarrow", "torch"})
    assert python.exists()
