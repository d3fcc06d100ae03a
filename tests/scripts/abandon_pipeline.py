"""A training script that breaks out of its loop and returns without closing its pipeline.

Run as ``python abandon_pipeline.py DATA_DIR RUNNER {torch,plain}``: it must exit 0 (the pipeline's
threads are stopped before the interpreter finalises them, however the loop was left).
"""

from __future__ import annotations

import sys

from zephon_core import Dataset, Pipeline, StaticMixtureWorkSource


def build(data: str, runner: str) -> Pipeline:
    ws = StaticMixtureWorkSource([Dataset.from_path("docs", data)], seed=1, exhaustion="repeat")
    return (
        Pipeline(ws)
        .tokenize(tokenizer_id="gpt2", parallelism=2)
        .pack_sequences(target_length=256)
        .batch(microbatch_size=4)
        .options(lanes=4, runner=runner)
    )


def train(data: str, runner: str, adapter: str) -> None:
    if adapter == "torch":
        from torch.utils.data import DataLoader
        from zephon_torch import to_torch_dataset

        loader = DataLoader(to_torch_dataset(lambda: build(data, runner)), batch_size=None)
        for step, _batch in enumerate(loader):
            if step == 3:
                break
    else:
        for step, _batch in enumerate(build(data, runner)):
            if step == 3:
                break


if __name__ == "__main__":
    train(*sys.argv[1:4])
    print("returned", flush=True)
