"""A checkpoint written by zephon-core 0.1.0, when scheduled mixtures were kernel classes, resumes here.

``data/checkpoint_0_1_0/`` holds a merged 2-rank checkpoint of a scheduled, trainer-steered pipeline
and the global-batch hashes of its uninterrupted run, both written once by release 0.1.0 (see
``make_checkpoint.py`` there) and never regenerated. The same frozen user script
(``builders.py``, which imports the classes from the ``zephon_core`` root as 0.1.0 users did) must
build a pipeline with the same fingerprint, load the checkpoint and deliver the rest of that run's
global batches on 1, 2 and 4 ranks. The source is fingerprinted by its ``describe()``, which names
its type (``"ScheduledMixtureWorkSource"``) but no module, so the move changes nothing a checkpoint
holds; this test is the evidence.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from zephon_core import ScheduledMixtureWorkSource

DATA = Path(__file__).parent / "data" / "checkpoint_0_1_0"


def _builders() -> ModuleType:
    spec = importlib.util.spec_from_file_location("curricula_builders_0_1_0", DATA / "builders.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


B = _builders()
EXPECTED: dict[str, Any] = json.loads((DATA / "expected.json").read_text())


def _checkpoint() -> dict[str, Any]:
    return json.loads((DATA / "checkpoint.json").read_text())


def test_the_files_were_written_by_release_0_1_0() -> None:
    assert EXPECTED["made_with"]["zephon_core"] == "0.1.0"
    state = _checkpoint()
    assert state["definition"]["source"]["type"] == "ScheduledMixtureWorkSource"
    assert state["source"]["updates"] == [{"step": B.UPDATE_STEP, "weights": {"code": 0.7, "web": 0.3}}]
    assert all(lane["skip"] > 0 for lane in state["lanes"].values()), "the cut is in the middle of a window"


def test_todays_pipeline_has_the_0_1_0_fingerprint() -> None:
    p = B.build().options(lanes=B.LANES, flush_every_k_chunks=B.FLUSH_EVERY)
    assert isinstance(p.source, ScheduledMixtureWorkSource)
    assert type(p.source).__module__ == "zephon_curricula.scheduled"
    assert p.state_dict()["fingerprint"] == EXPECTED["fingerprint"] == _checkpoint()["fingerprint"]


@pytest.mark.parametrize("world_size", [1, 2, 4])
def test_resumes_with_the_0_1_0_global_batches(world_size: int) -> None:
    rest, _ = B.run(world_size, steps=B.STEPS - B.CUT, resume=_checkpoint())
    assert rest == EXPECTED["uninterrupted"][B.CUT :]


def test_a_checkpoint_of_another_run_does_not_pass() -> None:
    """The comparison can fail: the same checkpoint with the trainer's update changed resumes another run."""
    state = _checkpoint()
    state["source"]["updates"][0]["weights"] = {"code": 0.2, "web": 0.8}
    rest, _ = B.run(1, steps=B.STEPS - B.CUT, resume=state)
    assert rest != EXPECTED["uninterrupted"][B.CUT :]
