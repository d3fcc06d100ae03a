"""The announcement's experiment, small: resume a run on another number of ranks, compare loss curves.

A tiny transformer LM trains on CPU on packed Shakespeare (GPT-2 tokens via ``zephon-tokenize``,
packing via ``zephon-pack``) on 2 ranks (gloo, DDP), checkpoints at step ``k``, and resumes from
that checkpoint on 1, 2 and 4 ranks, once with Zephon and once with a standard
``DataLoader`` + ``DistributedSampler`` over the same rows materialised once.

The global batch is the same in every configuration (ranks x gradient-accumulation microbatches
x microbatch rows), and each step's loss is the *sum* of per-token losses divided by the token
count of the *global* batch (``GlobalStep.global_num_tokens``), multiplied by the world size to
undo DDP's gradient averaging (exact: the world sizes are powers of two). So a step's update
does not depend on the number of ranks, up to the order of floating-point sums in gradient
accumulation and the gloo all-reduce. Any larger difference after the resume is the data.

Run from the repository root (it reads the shared offline corpus, :mod:`zephon_core.testing.corpus`)::

    python contrib/zephon-torch/examples/elastic_loss_curves.py --out /tmp/elastic

Writes ``loss_curves.png``, ``hashes.md`` / ``hashes.csv`` (per-step global batch hashes and
whether they match the uninterrupted 2-rank run) and ``results.json`` into ``--out``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from report import write_report
from standard_loader import PackedRows, materialise, standard_steps
from tiny_lm import TinyLM, TinyLMConfig, summed_token_loss
from torch.nn.parallel import DistributedDataParallel as DDP
from zephon_torch import ZephonLoader, load_checkpoint, save_checkpoint

from zephon_core import Dataset, Pipeline, StaticMixtureWorkSource


@dataclasses.dataclass(frozen=True)
class Experiment:
    """Every knob of the experiment (defaults: about ten minutes on two CPU cores)."""

    out: str
    steps: int = 200
    checkpoint_step: int = 60
    base_world: int = 2
    worlds: tuple[int, ...] = (1, 2, 4)
    lanes: int = 4
    microbatch: int = 4
    global_batch: int = 16
    seq_len: int = 128
    dim: int = 64
    heads: int = 4
    layers: int = 2
    vocab: int = 8192
    docs: int | None = None
    lr: float = 3e-3
    warmup: int = 20
    seed: int = 0
    timeout: float = 300.0

    @property
    def model(self) -> TinyLMConfig:
        return TinyLMConfig(self.vocab, self.seq_len, self.dim, self.heads, self.layers)

    def lr_at(self, step: int) -> float:
        """Linear warm-up, then cosine to 10%: a pure function of the step, so nothing to checkpoint."""
        if step < self.warmup:
            return self.lr * (step + 1) / self.warmup
        t = (step - self.warmup) / max(1, self.steps - self.warmup)
        return self.lr * (0.1 + 0.45 * (1 + math.cos(math.pi * t)))


def corpus_documents(limit: int | None) -> list[dict[str, Any]]:
    """The shared offline corpus (Shakespeare paragraphs) that the repository's tests read too."""
    from zephon_core.testing.corpus import documents

    return documents(limit=limit)


def build_pipeline(exp: Experiment) -> Pipeline:
    """Shakespeare -> GPT-2 tokens -> packed rows of ``seq_len`` -> microbatches, on ``lanes`` lanes."""
    texts = [{"text": d["text"]} for d in corpus_documents(exp.docs)]
    ws = StaticMixtureWorkSource([Dataset.from_records("shakespeare", texts)], chunk_size=64, seed=exp.seed)
    return (
        Pipeline(ws)
        .tokenize(tokenizer_id="gpt2", parallelism=1)
        .pack_sequences(target_length=exp.seq_len)
        .batch(microbatch_size=exp.microbatch)
        .options(lanes=exp.lanes, runner="threads")
    )


# -- the two data sources, as "one list of microbatches per global step" --------------------------
StepData = tuple[list[dict[str, torch.Tensor]], int, str]
"""This rank's microbatches, the global batch's token count, the global batch's hash."""


class ZephonData:
    """Zephon: the pipeline runs online in every rank; the loader's state resumes on any world size."""

    def __init__(self, exp: Experiment, ckpt: Path, resume: bool) -> None:
        self.loader = ZephonLoader(
            build_pipeline(exp), global_batch_size=exp.global_batch, timeout=timedelta(seconds=exp.timeout)
        )
        self.path = ckpt / "zephon-loader.json"
        if resume:
            self.loader.load_state_dict(load_checkpoint(self.path))

    def steps(self) -> Iterator[StepData]:
        for step in self.loader:
            yield step.microbatches, int(step.global_num_tokens or 0), self.loader.global_batch_hash(step)

    def save(self, steps_done: int) -> None:
        save_checkpoint(self.loader, self.path)

    def close(self) -> None:
        self.loader.close()


class StandardData:
    """DataLoader + DistributedSampler over the materialised rows; resumes by per-rank sample count."""

    def __init__(self, exp: Experiment, ckpt: Path, resume: bool, rank: int, world: int) -> None:
        self.exp, self.rank, self.world, self.ckpt = exp, rank, world, ckpt
        self.dataset = PackedRows(Path(exp.out) / "rows.npz")
        self.per_rank_rows = exp.global_batch // world
        yielded = 0
        if resume:  # rank r reads old rank r % old_world's state: all hold the same count
            old = json.loads((ckpt / "standard-loader.json").read_text())
            yielded = old["yielded_per_rank"][rank % len(old["yielded_per_rank"])]
        self.iter = standard_steps(
            self.dataset,
            rank=rank,
            world=world,
            seed=exp.seed,
            microbatch=exp.microbatch,
            per_rank_rows=self.per_rank_rows,
            yielded=yielded,
        )
        self.yielded = yielded

    def steps(self) -> Iterator[StepData]:
        for micro in self.iter:
            local = [int(i) for mb in micro for i in mb["index"]]
            tokens = torch.tensor([sum(int(mb["num_valid_tokens"].sum()) for mb in micro)])
            dist.all_reduce(tokens)
            everyone: list[list[int]] = [[] for _ in range(self.world)]
            dist.all_gather_object(everyone, local)
            self.yielded += len(local)
            yield micro, int(tokens.item()), self.dataset.rows_hash([i for part in everyone for i in part])

    def save(self, steps_done: int) -> None:
        counts: list[int] = [0] * self.world
        dist.all_gather_object(counts, self.yielded)
        if self.rank == 0:
            (self.ckpt / "standard-loader.json").write_text(json.dumps({"yielded_per_rank": counts}))

    def close(self) -> None:
        pass


# -- one rank --------------------------------------------------------------------------------------
def train(kind: str, exp: Experiment, rank: int, world: int, phase: str) -> None:
    """Train (phase "base": from scratch, checkpoint at k; "resume": from that checkpoint to the end)."""
    ckpt = Path(exp.out) / "checkpoint" / kind
    ckpt.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(exp.seed)
    model = TinyLM(exp.model)
    opt = torch.optim.AdamW(model.parameters(), lr=exp.lr, betas=(0.9, 0.95), weight_decay=0.0)
    start = 0
    if phase == "resume":
        state = torch.load(ckpt / "trainer.pt", weights_only=True)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        start = int(state["step"])
    ddp = DDP(model)
    data: ZephonData | StandardData = (
        ZephonData(exp, ckpt, phase == "resume")
        if kind == "zephon"
        else StandardData(exp, ckpt, phase == "resume", rank, world)
    )
    record: dict[str, Any] = {"kind": kind, "phase": phase, "world": world, "steps": [], "loss": [], "hash": []}
    started = time.monotonic()
    source = data.steps()
    for step in range(start, exp.steps):
        micro, global_tokens, batch_hash = next(source)
        for group in opt.param_groups:
            group["lr"] = exp.lr_at(step)
        loss_sum = torch.zeros((), dtype=torch.float64)
        for i, mb in enumerate(micro):
            sync = contextlib.nullcontext() if i == len(micro) - 1 else ddp.no_sync()
            with sync:
                summed = summed_token_loss(ddp, mb, exp.vocab)
                (summed * world / global_tokens).backward()
            loss_sum += summed.detach().double()
        opt.step()
        opt.zero_grad(set_to_none=True)
        dist.all_reduce(loss_sum)
        record["steps"].append(step)
        record["loss"].append(loss_sum.item() / global_tokens)
        record["hash"].append(batch_hash)
        if phase == "base" and step + 1 == exp.checkpoint_step:
            data.save(step + 1)
            if rank == 0:
                torch.save(
                    {"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step + 1}, ckpt / "trainer.pt"
                )
            dist.barrier()
    data.close()
    record["seconds"] = time.monotonic() - started
    if rank == 0:
        runs = Path(exp.out) / "runs"
        runs.mkdir(exist_ok=True)
        (runs / f"{kind}-{phase}-w{world}.json").write_text(json.dumps(record))


def rank_main(rank: int, world: int, exp_fields: dict[str, Any], phase: str, store: str) -> None:
    """Entry point of each spawned rank: one gloo process group, both data sources in turn."""
    exp = Experiment(**exp_fields)
    torch.set_num_threads(1)  # identical kernels on every world size
    torch.use_deterministic_algorithms(True)
    dist.init_process_group(
        "gloo", init_method=f"file://{store}", rank=rank, world_size=world, timeout=timedelta(seconds=exp.timeout)
    )
    try:
        for kind in ("zephon", "standard"):
            train(kind, exp, rank, world, phase)
    finally:
        dist.destroy_process_group()


def launch(exp: Experiment, world: int, phase: str) -> float:
    """Spawn ``world`` ranks (like torchrun on one machine); returns the wall time."""
    store = Path(exp.out) / f"store-{uuid.uuid4().hex[:8]}"
    started = time.monotonic()
    mp.spawn(rank_main, args=(world, dataclasses.asdict(exp), phase, str(store)), nprocs=world, join=True)
    return time.monotonic() - started


def run(exp: Experiment) -> dict[str, Any]:
    """The whole experiment; returns (and writes) the summary."""
    out = Path(exp.out)
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    timings: dict[str, float] = {}
    t = time.monotonic()
    rows = materialise(build_pipeline(exp).options(runner="inline"), exp.steps, out / "rows.npz")
    timings["materialise"] = time.monotonic() - t
    print(f"materialised {rows} packed rows for the standard loader in {timings['materialise']:.1f} s", flush=True)
    timings[f"base-w{exp.base_world}"] = launch(exp, exp.base_world, "base")
    print(f"base run on {exp.base_world} ranks: {timings[f'base-w{exp.base_world}']:.1f} s", flush=True)
    for world in exp.worlds:
        timings[f"resume-w{world}"] = launch(exp, world, "resume")
        print(f"resumed on {world} rank(s): {timings[f'resume-w{world}']:.1f} s", flush=True)
    summary = write_report(exp, out, timings)
    print(json.dumps(summary["verdict"], indent=2))
    return summary


def parse(argv: list[str] | None = None) -> Experiment:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    defaults = Experiment(out="")
    p.add_argument("--out", required=True, help="output folder (plot, tables, checkpoints)")
    for field in dataclasses.fields(Experiment):
        if field.name in ("out", "worlds"):
            continue
        default = getattr(defaults, field.name)
        kind = int if field.name == "docs" else type(default)
        p.add_argument(f"--{field.name.replace('_', '-')}", type=kind, default=default)
    p.add_argument("--worlds", type=int, nargs="+", default=list(defaults.worlds))
    args = vars(p.parse_args(argv))
    args["worlds"] = tuple(args["worlds"])
    return Experiment(**args)


if __name__ == "__main__":
    run(parse())
