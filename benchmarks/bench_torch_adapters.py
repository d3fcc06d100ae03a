"""Rows/s of the three ways to feed PyTorch from one pipeline, in the same run.

* ``direct``: ``for batch in pipeline: to_tensors(batch.to_training())``;
* ``ZephonLoader``: global steps of tensors (one rank, so no collectives);
* ``DataLoader(to_torch_dataset(p), batch_size=None)`` and torchdata's ``StatefulDataLoader``.

Two pipelines: ``text`` (the zephon-torch test pipeline: Shakespeare, GPT-2 tokenize, pack to 64
tokens, microbatch 2, 4 lanes; needs zephon-tokenize/zephon-pack) and ``records`` (in-memory
numeric records batched by 8: almost no work per row, so per-microbatch overhead shows). Each
way runs ``--repeats`` times on a freshly built pipeline, interleaved; the median is printed.
Run: ``python benchmarks/bench_torch_adapters.py``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Iterable

import numpy as np
import torch
from torch.utils.data import DataLoader
from zephon_torch import ZephonLoader, to_tensors, to_torch_dataset

from zephon_core import Dataset, Pipeline, StaticMixtureWorkSource


def build_records() -> Pipeline:
    rng = np.random.default_rng(0)
    recs = [{"x": rng.integers(0, 50_000, 64).astype(np.int32), "y": int(i)} for i in range(20_000)]
    ws = StaticMixtureWorkSource([Dataset.from_records("r", recs, shard_size=2000)], chunk_size=64, seed=1)
    return Pipeline(ws).batch(microbatch_size=8).options(lanes=4, runner="threads")


def build_text() -> Pipeline:
    from zephon_torch.testing.text import build

    return build(docs=2000)


def rows(tensors: Iterable[dict[str, torch.Tensor]]) -> int:
    n = 0
    for mb in tensors:
        n += next(iter(mb.values())).shape[0]
    return n


def direct(p: Pipeline) -> int:
    return rows(to_tensors(b.to_training()) for b in p)


def zephon_loader(p: Pipeline) -> int:
    with ZephonLoader(p, dp_rank=0, dp_world_size=1) as loader:
        return sum(rows(step) for step in loader)


def dataloader(p: Pipeline) -> int:
    return rows(DataLoader(to_torch_dataset(p), batch_size=None))


def stateful_dataloader(p: Pipeline) -> int:
    from torchdata.stateful_dataloader import StatefulDataLoader

    return rows(StatefulDataLoader(to_torch_dataset(p), batch_size=None))


WAYS: dict[str, Callable[[Pipeline], int]] = {
    "direct iteration": direct,
    "ZephonLoader": zephon_loader,
    "DataLoader(to_torch_dataset)": dataloader,
    "StatefulDataLoader(to_torch_dataset)": stateful_dataloader,
}


def layer_overhead(n: int = 50_000) -> dict[str, float]:
    """Microseconds per microbatch that each wrapper adds around an already-made microbatch."""
    from torchdata.stateful_dataloader import StatefulDataLoader

    mb = {"input_ids": torch.zeros(2, 64, dtype=torch.int32), "num_valid_tokens": torch.ones(2, dtype=torch.int64)}

    class Items(torch.utils.data.IterableDataset):
        def __iter__(self):
            return (mb for _ in range(n))

        def state_dict(self):
            return {}

        def load_state_dict(self, state):
            pass

    out = {}
    for way, it in (
        ("plain generator", lambda: (mb for _ in range(n))),
        ("DataLoader(batch_size=None)", lambda: DataLoader(Items(), batch_size=None)),
        ("StatefulDataLoader(batch_size=None)", lambda: StatefulDataLoader(Items(), batch_size=None)),
    ):
        t0 = time.perf_counter()
        for _ in it():
            pass
        out[way] = (time.perf_counter() - t0) / n * 1e6
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--pipelines", default="records,text")
    args = ap.parse_args()
    torch.set_num_threads(1)
    builders = {"records": build_records, "text": build_text}
    print("per-microbatch cost of the wrapper alone (no pipeline)\n| way | us/microbatch |\n|---|---:|")
    for way, us in layer_overhead().items():
        print(f"| {way} | {us:.1f} |")
    for name in filter(None, args.pipelines.split(",")):
        rates: dict[str, list[float]] = {w: [] for w in WAYS}
        counts: dict[str, int] = {}
        for _ in range(args.repeats):
            for way, fn in WAYS.items():
                p = builders[name]()
                t0 = time.perf_counter()
                counts[way] = fn(p)
                rates[way].append(counts[way] / (time.perf_counter() - t0))
                p.close()
        base = statistics.median(rates["direct iteration"])
        print(f"\n{name} pipeline ({counts['direct iteration']} rows, median of {args.repeats})")
        print("| way | rows/s | vs direct |\n|---|---:|---:|")
        for way, r in rates.items():
            m = statistics.median(r)
            print(f"| {way} | {m:,.0f} | {m / base:.2f}x |")


if __name__ == "__main__":
    main()
