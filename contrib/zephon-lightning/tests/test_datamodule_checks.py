"""ZephonDataModule in one process: refusals that name the setting, and the read-ahead bookkeeping."""

from __future__ import annotations

import pytest

pytest.importorskip("lightning")

from zephon_lightning import ZephonDataModule
from zephon_torch.testing.records import build

from zephon_core import ConfigError


def test_needs_a_function_building_the_pipeline():
    with pytest.raises(ConfigError, match="needs a function that builds the pipeline"):
        ZephonDataModule(build(), global_microbatches_per_step=4)


def test_a_checkpoint_with_another_global_batch_is_refused():
    dm = ZephonDataModule(build, global_microbatches_per_step=4)
    with pytest.raises(ConfigError, match=r"global batch is 8 microbatches .* global_microbatches_per_step=8"):
        dm.load_state_dict({"global_microbatches_per_step": 8, "dataset": {}})


def test_the_saved_position_is_that_of_the_last_optimizer_step():
    """Neither a batch read ahead nor one of a step still accumulating is part of the saved position."""
    dm = ZephonDataModule(build, global_microbatches_per_step=4)
    loader = iter(dm.train_dataloader())
    batches = [next(loader) for _ in range(6)]  # 4 + 1 handed to the step, 1 read ahead
    assert isinstance(batches[0]["id"], list)  # strings stay lists
    for _ in range(4 + 1):  # one optimizer step of 4, then one microbatch of the next step
        dm.taken(accumulate=4)  # what on_before_batch_transfer does while training
    state = dm.state_dict()  # at the step boundary: the half-accumulated step is trained on again
    assert {v["delivered"] for v in state["dataset"]["lanes"].values()} == {1}
    again = ZephonDataModule(build, global_microbatches_per_step=4)
    again.load_state_dict(state)
    assert next(iter(again.train_dataloader()))["id"] == batches[4]["id"]  # the next step's first batch
    dm.teardown("fit")
    again.teardown("fit")
