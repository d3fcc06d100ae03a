"""A training process that the fault-injection test SIGKILLs at random moments.

Run as ``python -m tests.killable_trainer DIR WORLD RUNNER``: resumes from ``DIR/checkpoint.json`` if
present, runs ``WORLD`` data-parallel ranks in lockstep (one pipeline each, one round per global
step), appends each global step's record ids to ``DIR/steps.jsonl`` and checkpoints after every step
(written to a temporary file, fsynced, then renamed, so a kill never leaves half a checkpoint). It
prints ``started`` once resumed and ``step N`` after each checkpoint.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from zephon_core import Pipeline, merge_checkpoints
from zephon_core.demo import build, make_source

LANES = 4
STEP_SECONDS = 0.05  # stands in for a training step


def builder() -> Pipeline:
    return build(2, source=make_source(chunk_size=32))


def write_atomically(path: Path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def main(folder: str, world: int, runner: str) -> None:
    root = Path(folder)
    ckpt = root / "checkpoint.json"
    state = json.loads(ckpt.read_text()) if ckpt.exists() else None
    step = state["step"] if state else 0
    pipes = [builder().options(lanes=LANES, dp_rank=r, dp_world_size=world, runner=runner) for r in range(world)]
    try:
        for p in pipes:
            if state is not None:
                p.load_state_dict(state)
        iters = [iter(p) for p in pipes]
        per = LANES // world
        print("started", flush=True)
        with open(root / "steps.jsonl", "a") as out:
            while True:
                rows: list[list[int]] = []
                try:
                    for it in iters:
                        for _ in range(per):
                            rows.extend(list(lin) for lin in next(it).lineage)
                except StopIteration:
                    break
                time.sleep(STEP_SECONDS)
                step += 1
                out.write(json.dumps({"step": step, "rows": rows}) + "\n")
                out.flush()
                os.fsync(out.fileno())
                write_atomically(ckpt, json.dumps(merge_checkpoints([p.state_dict() for p in pipes])))
                print("step", step, flush=True)  # the test counts steps, so kills do not depend on speed
        (root / "done").write_text(str(step))
    finally:
        for p in pipes:
            p.close()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
