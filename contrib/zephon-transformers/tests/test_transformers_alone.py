"""zephon-transformers installed alone (kernel, zephon-torch, transformers, accelerate) in a fresh venv.

The script trains a tiny Llama for 4 steps with ``ZephonTrainer`` in one process, saves a Trainer
checkpoint, resumes from it with ``resume_from_checkpoint=True`` and checks the data state file is
there and the run ends at the step limit. Opt-in (``ZEPHON_TEST_ALONE=1``): it copies torch and
transformers into a new environment.
"""

from __future__ import annotations

import os

import pytest
from zephon_testkit.isolated import check_alone_with_torch, clean_env

SCRIPT = r"""
import os, sys, tempfile
import torch
from transformers import LlamaConfig, LlamaForCausalLM, TrainingArguments
from zephon_torch import to_torch_dataset
from zephon_torch.testing.records import VOCAB, build
from zephon_transformers import DATA_STATE_FILE, ZephonTrainer

def trainer(out, steps):
    args = TrainingArguments(output_dir=out, max_steps=steps, save_steps=2, gradient_accumulation_steps=4,
                             report_to="none", use_cpu=True, disable_tqdm=True)
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2)
    return ZephonTrainer(model=LlamaForCausalLM(cfg), args=args, train_dataset=to_torch_dataset(build))

if __name__ == "__main__":
    out = tempfile.mkdtemp()
    t = trainer(out, 2); t.train(); t.zephon_dataset.close()
    assert os.path.isfile(os.path.join(out, "checkpoint-2", DATA_STATE_FILE))
    t = trainer(out, 4); t.train(resume_from_checkpoint=True); t.zephon_dataset.close()
    assert t.state.global_step == 4, t.state.global_step
    print("ALONE OK")
"""


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.skipif(
    os.environ.get("ZEPHON_TEST_ALONE") != "1",
    reason="installs torch and transformers into a fresh venv; set ZEPHON_TEST_ALONE=1 to run it",
)
def test_installed_alone(tmp_path):
    check_alone_with_torch(
        "zephon-transformers",
        tmp_path,
        SCRIPT,
        present={"zephon-torch", "transformers", "accelerate", "torch"},
        absent={"lightning", "torchdata", "zephon-tokenize"},
        env=clean_env(HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf"), TMPDIR=str(tmp_path)),
        timeout=600,
    )
