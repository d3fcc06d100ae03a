"""zephon-lightning installed alone (kernel, zephon-torch, lightning) in a fresh venv.

The script trains a tiny model for 2 steps with ``ZephonDataModule`` on one CPU device, saves a
Lightning checkpoint, resumes from it and checks the run ends at the step limit. Opt-in
(``ZEPHON_TEST_ALONE=1``): it copies torch and lightning into a new environment.
"""

from __future__ import annotations

import os

import pytest
from zephon_testkit.isolated import check_alone_with_torch, clean_env

SCRIPT = r"""
import tempfile
import lightning.pytorch as pl
import torch
from zephon_lightning import ZephonDataModule
from zephon_torch.testing.records import VOCAB, build

class M(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(VOCAB, 8)
    def training_step(self, batch, i):
        assert isinstance(batch["id"], list)
        return self.emb(batch["input_ids"]).float().pow(2).mean()
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)

if __name__ == "__main__":
    out = tempfile.mkdtemp()
    def trainer(steps):
        return pl.Trainer(accelerator="cpu", devices=1, max_steps=steps, accumulate_grad_batches=4, logger=False,
                          enable_progress_bar=False, default_root_dir=out)
    t = trainer(2); t.fit(M(), datamodule=ZephonDataModule(build, global_microbatches_per_step=4))
    t.save_checkpoint(out + "/c.ckpt")
    t = trainer(4); t.fit(M(), datamodule=ZephonDataModule(build, global_microbatches_per_step=4), ckpt_path=out + "/c.ckpt")
    assert t.global_step == 4, t.global_step
    print("ALONE OK")
"""


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.skipif(
    os.environ.get("ZEPHON_TEST_ALONE") != "1",
    reason="installs torch and lightning into a fresh venv; set ZEPHON_TEST_ALONE=1 to run it",
)
def test_installed_alone(tmp_path):
    check_alone_with_torch(
        "zephon-lightning",
        tmp_path,
        SCRIPT,
        present={"zephon-torch", "lightning", "torch"},
        absent={"transformers", "torchdata", "zephon-tokenize"},
        env=clean_env(TMPDIR=str(tmp_path)),
        timeout=600,
    )
