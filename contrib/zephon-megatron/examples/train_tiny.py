"""Train a tiny model on CPU with Megatron-Core's parallel state, microbatch calculator and checkpoint files.

Run (2 processes, tensor parallel size 1, so 2 data-parallel ranks)::

    torchrun --standalone --nproc-per-node 2 train_tiny.py --iters 12 --save ckpt/

``--tp 2`` on 4 processes gives 2 data-parallel ranks whose 2 tensor-parallel ranks each read the
same microbatches. Run again with another process count and ``--load ckpt/``: the newest
checkpoint (``latest_checkpointed_iteration.txt``, as Megatron-LM writes it) is restored, data
position included, on any data-parallel size dividing the 4 lanes.

Megatron's forward-backward schedules and its sharded-tensor checkpoint writer need CUDA, so the
loop below does what ``forward_backward_no_pipelining`` does (one ``next(data_iterator)`` per
microbatch, ``get_num_microbatches()`` of them) and the checkpoint goes through Megatron's
common-state strategy (``common.pt``), which is where the data state lives in a GPU run too.
``--hashes FILE`` writes the SHA-256 of every global batch (for the package's tests).
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
from megatron.core import parallel_state
from megatron.core.dist_checkpointing.strategies.common import TorchCommonLoadStrategy, TorchCommonSaveStrategy
from megatron.core.num_microbatches_calculator import get_num_microbatches, init_num_microbatches_calculator
from zephon_megatron import ZephonMegatronData
from zephon_torch import gather_global_batch_hash

from zephon_core import Dataset, Pipeline, StaticMixtureWorkSource

VOCAB = 64
SEQ = 16
LANES = 4  # a common multiple of every data-parallel size the run may use: 1, 2, 4


def build_pipeline(micro_batch_size: int) -> Pipeline:
    """Token rows from 400 synthetic documents (any Zephon pipeline works here)."""

    def tokens(record: dict) -> dict:
        i = record["i"]
        ids = (np.arange(SEQ + 1, dtype=np.int64) * (i % 5 + 1) + i) % VOCAB
        return {"tokens": ids[:-1], "labels": ids[1:], "loss_mask": np.ones(SEQ, dtype=np.float32)}

    ws = StaticMixtureWorkSource([Dataset.from_records("docs", [{"i": i} for i in range(400)])], chunk_size=16, seed=9)
    return Pipeline(ws).map_transform(tokens).batch(microbatch_size=micro_batch_size).options(lanes=LANES)


def main() -> None:
    args = argparse.ArgumentParser()
    args.add_argument("--iters", type=int, default=12)
    args.add_argument("--tp", type=int, default=1)
    args.add_argument("--micro-batch-size", type=int, default=2)
    args.add_argument("--global-batch-size", type=int, default=16)
    args.add_argument("--save", type=Path, default=None)
    args.add_argument("--save-interval", type=int, default=4)
    args.add_argument("--load", type=Path, default=None)
    args.add_argument("--hashes", type=Path, default=None)
    a = args.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=a.tp)
    dp_group = parallel_state.get_data_parallel_group()
    dp = parallel_state.get_data_parallel_world_size()
    init_num_microbatches_calculator(dist.get_rank(), None, a.global_batch_size, a.micro_batch_size, dp)

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(VOCAB, 16), torch.nn.Linear(16, VOCAB))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    data = ZephonMegatronData(
        build_pipeline(a.micro_batch_size), micro_batch_size=a.micro_batch_size, global_batch_size=a.global_batch_size
    )
    iteration, consumed_train_samples = 0, 0
    if a.load is not None and (a.load / "latest_checkpointed_iteration.txt").exists():
        iteration = int((a.load / "latest_checkpointed_iteration.txt").read_text())
        common = TorchCommonLoadStrategy().load_common(a.load / f"iter_{iteration:07d}")
        model.load_state_dict(common["model"])
        opt.load_state_dict(common["optimizer"])
        consumed_train_samples = common["consumed_train_samples"]
        data.load_state_dict(common["zephon_data"], consumed_samples=consumed_train_samples)

    hashes: dict[int, str] = {}
    while iteration < a.iters:
        opt.zero_grad(set_to_none=True)
        try:
            for _ in range(get_num_microbatches()):  # forward_backward_no_pipelining's loop
                mb = next(data)
                logits = model(mb["tokens"])
                losses = F.cross_entropy(logits.flatten(0, 1), mb["labels"].flatten(), reduction="none")
                mask = mb["loss_mask"].flatten()
                ((losses * mask).sum() / mask.sum() / get_num_microbatches()).backward()
        except StopIteration:
            break
        for p in model.parameters():  # Megatron's DDP: average gradients over the data-parallel group
            dist.all_reduce(p.grad, group=dp_group)
            p.grad /= dp
        opt.step()
        iteration += 1
        consumed_train_samples += dp * a.micro_batch_size * get_num_microbatches()  # as Megatron-LM counts
        if a.hashes is not None:
            hashes[iteration] = gather_global_batch_hash(data.last_batches, data.loader.info)
        if a.save is not None and iteration % a.save_interval == 0:
            zephon_state = data.state_dict()  # every rank (a collective over the dp group)
            folder = a.save / f"iter_{iteration:07d}"
            if dist.get_rank() == 0:
                folder.mkdir(parents=True, exist_ok=True)
                common = {
                    "iteration": iteration,
                    "consumed_train_samples": consumed_train_samples,
                    "model": model.state_dict(),
                    "optimizer": opt.state_dict(),
                    "zephon_data": zephon_state,
                }
                TorchCommonSaveStrategy("torch", 1).save_common(common, folder)  # rank 0 writes common.pt
                (a.save / "latest_checkpointed_iteration.txt").write_text(str(iteration))
            dist.barrier()
        if dist.get_rank() == 0:
            print(
                f"iteration {iteration} consumed {consumed_train_samples} loss {losses.mean().item():.4f}", flush=True
            )
    data.close()
    if a.hashes is not None and dist.get_rank() == 0:
        a.hashes.write_text(json.dumps(hashes))
    dist.barrier()
    parallel_state.destroy_model_parallel()
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
