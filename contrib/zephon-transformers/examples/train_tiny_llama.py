"""A tiny Llama trained by the Hugging Face Trainer on a Zephon pipeline, on CPU with gloo.

    torchrun --standalone --nproc-per-node 2 train_tiny_llama.py --out run/ --max-steps 24 --save-steps 12
    torchrun --standalone --nproc-per-node 1 train_tiny_llama.py --out run/ --max-steps 24 --resume

The model is built from a config (nothing is downloaded). The global batch is 4 microbatches of
2 rows: ``gradient_accumulation_steps`` is 4 / processes, so the resumed run on 1 (or 4) processes
trains on the same global batches as the 2-process run would have. ``--record DIR`` writes the
SHA-256 of every microbatch the model receives, per process (the package's tests compare them).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

import torch
from transformers import LlamaConfig, LlamaForCausalLM, TrainingArguments
from zephon_torch import to_torch_dataset
from zephon_torch.testing.records import LANES, VOCAB, build
from zephon_transformers import ZephonTrainer

from zephon_core.hashing import hash_arrays

DOCS = 480  # enough for 24 steps of 8 rows on every lane


def pipeline() -> Any:
    return build(DOCS)  # records with input_ids, labels, an "id" and a "text" (dropped before the model)


class RecordingTrainer(ZephonTrainer):
    """Hashes each microbatch as the model receives it (for comparing runs)."""

    hashes: list[str]

    def training_step(self, model: Any, inputs: dict[str, Any], num_items_in_batch: Any = None) -> torch.Tensor:
        self.hashes.append(hash_arrays({k: v.cpu().numpy() for k, v in inputs.items()}))
        return super().training_step(model, inputs, num_items_in_batch)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--max-steps", type=int, default=24)
    p.add_argument("--save-steps", type=int, default=12)
    p.add_argument("--resume", action="store_true")
    p.add_argument("--record", type=Path)
    a = p.parse_args()
    torch.set_num_threads(1)
    world = int(os.environ.get("WORLD_SIZE", "1"))

    args = TrainingArguments(
        output_dir=str(a.out),
        max_steps=a.max_steps,
        save_steps=a.save_steps,
        per_device_train_batch_size=2,  # informational: the pipeline batches (microbatch_size=2)
        gradient_accumulation_steps=LANES // world,  # global batch = 4 microbatches on any process count
        learning_rate=1e-3,
        logging_steps=4,
        report_to="none",
        use_cpu=True,
        ddp_backend="gloo",
        dataloader_num_workers=0,
        disable_tqdm=True,
        seed=0,
    )
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=2, max_position_embeddings=64,
    )
    trainer_cls = RecordingTrainer if a.record else ZephonTrainer
    trainer = trainer_cls(model=LlamaForCausalLM(config), args=args, train_dataset=to_torch_dataset(pipeline))
    if a.record:
        trainer.hashes = []
    trainer.train(resume_from_checkpoint=True if a.resume else None)
    if a.record:
        a.record.mkdir(parents=True, exist_ok=True)
        rank = args.process_index
        (a.record / f"rank{rank}.json").write_text(json.dumps({"world": world, "hashes": trainer.hashes}))
    trainer.zephon_dataset.close()


if __name__ == "__main__":
    main()
