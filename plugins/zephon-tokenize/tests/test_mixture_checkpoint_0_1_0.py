"""A checkpoint written by zephon-tokenize 0.1.0 through ``ensure_mixture()`` resumes with its batches.

``data/checkpoint_0_1_0/`` holds a merged 2-rank checkpoint of tokenize → pack → ensure_mixture →
batch and the global-batch hashes of its uninterrupted run, both written once by release 0.1.0 (see
``make_checkpoint.py`` there) and never regenerated. ``ensure_mixture``'s default rule has changed
since (``release="balanced"``); the frozen user script (``builders.py``) leaves it at the default, so
loading the checkpoint must adopt the rule 0.1.0 used and deliver the rest of that run's global
batches on 1, 2 and 4 ranks.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from zephon_tokenize import EnsureMixture

DATA = Path(__file__).parent / "data" / "checkpoint_0_1_0"


def _builders() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mixture_builders_0_1_0", DATA / "builders.py")
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
    mix = [op for op in state["definition"]["operators"] if op["kind"] == "ensure_mixture"]
    assert mix and "release" not in mix[0]["config"], "0.1.0 recorded no release rule"
    assert all(lane["skip"] > 0 for lane in state["lanes"].values()), "the cut is in the middle of a window"


def test_a_fresh_pipeline_uses_the_new_rule_and_so_another_fingerprint() -> None:
    p = B.build().options(lanes=B.LANES, flush_every_k_chunks=B.FLUSH_EVERY)
    assert next(op for op in p.operators if isinstance(op, EnsureMixture)).release == "balanced"
    assert p.state_dict()["fingerprint"] != EXPECTED["fingerprint"]


@pytest.mark.parametrize("world_size", [1, 2, 4])
def test_resumes_with_the_0_1_0_global_batches(world_size: int) -> None:
    rest, _ = B.run(world_size, steps=B.STEPS - B.CUT, resume=_checkpoint())
    assert rest == EXPECTED["uninterrupted"][B.CUT :]
