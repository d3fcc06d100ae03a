"""A tiny language model trained by Lightning on a Zephon pipeline, on CPU with DDP over gloo.

    python train_tiny_lm.py --devices 2 --out run/ --max-steps 24 --save-every 12
    python train_tiny_lm.py --devices 1 --out run/ --max-steps 24 --resume run/step=12.ckpt

Lightning starts the other processes itself (``strategy="ddp"``). The global batch is 4
microbatches of 2 rows: ``accumulate_grad_batches`` is 4 / devices, so a run resumed on 1 (or 4)
devices trains on the same global batches. ``--record DIR`` writes the SHA-256 of every
microbatch the training step receives, per process (the package's tests compare them).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from lightning.pytorch.callbacks import ModelCheckpoint
from zephon_lightning import ZephonDataModule
from zephon_torch.testing.records import LANES, VOCAB, build

from zephon_core.hashing import hash_arrays

DOCS = 480


def pipeline() -> Any:
    return build(DOCS)  # input_ids, labels, plus an "id" and a "text" field (lists of strings)


class TinyLM(pl.LightningModule):
    def __init__(self, record: Path | None = None) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(VOCAB, 32)
        self.head = torch.nn.Linear(32, VOCAB)
        self.record = record
        self.hashes: list[str] = []

    def training_step(self, batch: dict[str, Any], batch_idx: int) -> torch.Tensor:
        if self.record is not None:
            self.hashes.append(hash_arrays({k: batch[k].cpu().numpy() for k in ("input_ids", "labels")}))
        logits = self.head(self.emb(batch["input_ids"]))
        loss = F.cross_entropy(logits[:, :-1].flatten(0, 1), batch["labels"][:, 1:].flatten())
        self.log("loss", loss, prog_bar=False)
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.AdamW(self.parameters(), lr=1e-3)

    def on_train_end(self) -> None:
        if self.record is not None:
            self.record.mkdir(parents=True, exist_ok=True)
            out = self.record / f"rank{self.global_rank}.json"
            out.write_text(json.dumps({"world": self.trainer.world_size, "hashes": self.hashes}))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--devices", type=int, default=2)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--max-steps", type=int, default=24)
    p.add_argument("--save-every", type=int, default=12)
    p.add_argument("--resume", type=Path)
    p.add_argument("--record", type=Path)
    a = p.parse_args()
    torch.set_num_threads(1)
    pl.seed_everything(0, verbose=False)

    data = ZephonDataModule(pipeline, global_microbatches_per_step=LANES)
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=a.devices,
        strategy="ddp" if a.devices > 1 else "auto",
        max_steps=a.max_steps,
        accumulate_grad_batches=LANES // a.devices,
        callbacks=[ModelCheckpoint(dirpath=a.out, filename="{step}", every_n_train_steps=a.save_every, save_top_k=-1)],
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(TinyLM(a.record), datamodule=data, ckpt_path=str(a.resume) if a.resume else None)


if __name__ == "__main__":
    main()
