"""Train a tiny language model on CPU with torchtitan's components and a Zephon dataloader.

Run (2 data-parallel ranks, checkpoint every 4 steps into ``out/checkpoint/step-N``)::

    torchrun --standalone --nproc-per-node 2 train_tiny.py --steps 12 --dump out/

Run it again with another ``--nproc-per-node`` (1 or 4) and a larger ``--steps``: torchtitan's
``CheckpointManager`` finds the newest checkpoint in ``out/checkpoint`` and the dataloader
resumes exactly where the 2-rank run stopped. The loop is torchtitan's ``Trainer.train`` /
``train_step`` reduced to what runs on CPU: the same dataloader build call, the same
``next()``-per-microbatch gradient accumulation, the same optimizer, scheduler and checkpoint
objects. ``--hashes FILE`` writes the SHA-256 of every global batch (for the package's tests).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.checkpoint.stateful import Stateful
from torchtitan.components.checkpoint import CheckpointManager
from torchtitan.components.optimizer import OptimizersContainer
from torchtitan.components.optimizer.lr_scheduler import LRSchedulersContainer
from torchtitan.components.optimizer.optimizer import ParamGroupConfig
from zephon_torch import gather_global_batch_hash
from zephon_torchtitan import ZephonDataLoader

from zephon_core import Dataset, Pipeline, StaticMixtureWorkSource

VOCAB = 64
LANES = 4  # a common multiple of every dp degree the run may use: 1, 2, 4


def build_pipeline(seq_len: int, microbatch_size: int) -> Pipeline:
    """Token rows of ``seq_len + 1`` ids from 400 synthetic documents (any Zephon pipeline works here)."""

    def tokens(record: dict) -> dict:
        i = record["i"]
        ids = (np.arange(seq_len + 1, dtype=np.int64) * (i % 7 + 1) + i) % VOCAB
        return {"input_ids": ids[:-1], "labels": ids[1:], "doc": np.int64(i)}

    ws = StaticMixtureWorkSource([Dataset.from_records("docs", [{"i": i} for i in range(400)])], chunk_size=16, seed=5)
    return Pipeline(ws).map_transform(tokens).batch(microbatch_size=microbatch_size).options(lanes=LANES)


class TrainState(Stateful):
    """torchtitan's trainer keeps ``step`` in its checkpoint the same way (``states={"train_state": self}``)."""

    def __init__(self) -> None:
        self.step = 0

    def state_dict(self) -> dict[str, int]:
        return {"step": self.step}

    def load_state_dict(self, state_dict: dict[str, int]) -> None:
        self.step = int(state_dict["step"])


def main() -> None:
    args = argparse.ArgumentParser()
    args.add_argument("--steps", type=int, default=12)
    args.add_argument("--dump", type=Path, required=True)
    args.add_argument("--interval", type=int, default=4)
    args.add_argument("--local-batch-size", type=int, default=2)
    args.add_argument("--global-batch-size", type=int, default=16)
    args.add_argument("--seq-len", type=int, default=16)
    args.add_argument("--hashes", type=Path, default=None)
    args.add_argument("--load-step", type=int, default=-1, help="checkpoint step to resume from (-1: newest)")
    a = args.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    dp, rank = dist.get_world_size(), dist.get_rank()

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(VOCAB, 16), torch.nn.Linear(16, VOCAB))
    # -- what torchtitan's Trainer.__init__ does, in the same order ----------------------------
    grad_accum = a.global_batch_size // (a.local_batch_size * dp)
    optimizers = OptimizersContainer.Config(
        param_groups=[ParamGroupConfig(pattern=".*", optimizer_name="AdamW", optimizer_kwargs={"lr": 1e-2})],
        implementation="for-loop",
    ).build(model_parts=[model])
    lr_schedulers = LRSchedulersContainer.Config(warmup_steps=2).build(optimizers=optimizers, training_steps=a.steps)
    dataloader = ZephonDataLoader.Config(pipeline=build_pipeline).build(
        dp_world_size=dp, dp_rank=rank, tokenizer=None, seq_len=a.seq_len, local_batch_size=a.local_batch_size
    )
    train_state = TrainState()
    checkpointer = CheckpointManager.Config(
        enable=True, interval=a.interval, keep_latest_k=0, last_save_model_only=False
    ).build(
        dataloader=dataloader,
        model_parts=[model],
        optimizers=optimizers,
        lr_schedulers=lr_schedulers,
        states={"train_state": train_state},
        sd_adapter=None,
        base_folder=str(a.dump),
    )
    checkpointer.load(step=a.load_step)  # default: the newest in <dump>/checkpoint, from any dp degree
    # -- Trainer.train / train_step --------------------------------------------------------------
    hashes: dict[int, str] = {}
    data = iter(dataloader)
    while train_state.step < a.steps:
        train_state.step += 1
        optimizers.zero_grad()
        batches = []
        try:
            for _ in range(grad_accum):  # torchtitan: one next() per microbatch
                input_dict, labels = next(data)
                batches.append(dataloader.last_batch)
                logits = model(input_dict["input"])
                loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten()) / grad_accum
                loss.backward()
        except StopIteration:
            break  # every rank stops at the same step (the loader agrees on the end of data)
        for p in model.parameters():  # data-parallel gradient average (FSDP/DDP in torchtitan)
            dist.all_reduce(p.grad)
            p.grad /= dp
        optimizers.step()
        lr_schedulers.step()
        if a.hashes is not None:
            hashes[train_state.step] = gather_global_batch_hash(batches, dataloader.loader.info)
        if rank == 0:
            print(f"step {train_state.step} loss {loss.item() * grad_accum:.4f}", flush=True)
        checkpointer.save(train_state.step, last_step=train_state.step == a.steps)
    checkpointer.close()
    dataloader.close()
    if a.hashes is not None and rank == 0:
        a.hashes.write_text(json.dumps(hashes))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
