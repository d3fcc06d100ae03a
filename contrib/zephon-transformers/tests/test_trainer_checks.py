"""ZephonTrainer's refusals, in one process (no launcher): each names the setting to change."""

from __future__ import annotations

import json

import pytest

transformers = pytest.importorskip("transformers")

from zephon_torch import to_torch_dataset  # noqa: E402
from zephon_torch.testing.records import VOCAB, build  # noqa: E402
from zephon_transformers import DATA_STATE_FILE, KeepColumns, ZephonTrainer  # noqa: E402

from zephon_core import CheckpointError, ConfigError  # noqa: E402


def model():
    config = transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2
    )
    return transformers.LlamaForCausalLM(config)


def args(tmp_path, **kw):
    base = {"output_dir": str(tmp_path), "max_steps": 2, "report_to": "none", "use_cpu": True, "disable_tqdm": True}
    return transformers.TrainingArguments(**{**base, **kw})


def test_needs_a_zephon_dataset(tmp_path):
    with pytest.raises(ConfigError, match="needs train_dataset=zephon_torch.to_torch_dataset"):
        ZephonTrainer(model=model(), args=args(tmp_path), train_dataset=[1, 2])


def test_refuses_a_global_batch_that_is_not_whole_rounds(tmp_path):
    with pytest.raises(ConfigError, match=r"gradient_accumulation_steps=3 .* use a multiple of 4"):
        ZephonTrainer(model=model(), args=args(tmp_path, gradient_accumulation_steps=3), train_dataset=to_torch_dataset(build))


def test_refuses_dataloader_workers(tmp_path):
    with pytest.raises(ConfigError, match="dataloader_num_workers=2: use 0"):
        ZephonTrainer(
            model=model(), args=args(tmp_path, dataloader_num_workers=2, gradient_accumulation_steps=4),
            train_dataset=to_torch_dataset(build),
        )


def test_resume_checks_the_data_state_and_the_global_batch(tmp_path):
    trainer = ZephonTrainer(model=model(), args=args(tmp_path, gradient_accumulation_steps=4), train_dataset=to_torch_dataset(build))
    assert trainer.args.ignore_data_skip  # the position comes from the checkpoint, never from skipping batches
    ckpt = tmp_path / "checkpoint-2"
    ckpt.mkdir()
    with pytest.raises(CheckpointError, match=f"{DATA_STATE_FILE} is missing"):
        trainer.load_data_state(ckpt)
    (ckpt / DATA_STATE_FILE).write_text(json.dumps({"global_microbatches_per_step": 8, "dataset": {}}))
    with pytest.raises(ConfigError, match=r"global batch is 8 microbatches .* use gradient_accumulation_steps=8"):
        trainer.load_data_state(ckpt)
    trainer.zephon_dataset.close()


def test_keep_columns_drops_strings_the_model_does_not_take():
    mb = {"input_ids": 1, "labels": 2, "id": ["a"], "text": ["b"]}
    assert KeepColumns(["input_ids", "labels"])(mb) == {"input_ids": 1, "labels": 2}
    assert KeepColumns(None)(mb) == mb
    with pytest.raises(ConfigError, match="takes none of the microbatch's fields"):
        KeepColumns(["pixel_values"])(mb)
