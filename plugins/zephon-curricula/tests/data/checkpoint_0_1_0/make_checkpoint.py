"""Write this folder's checkpoint with zephon-core 0.1.0. Run once; the files are evidence, not output.

The checkpoint and the hashes in ``expected.json`` were written by release 0.1.0, when scheduled
mixtures were part of the kernel; ``tests/test_checkpoint_0_1_0.py`` resumes them with today's code
(zephon-curricula). Rewriting them with newer code would compare the new code with itself, so the
script refuses to overwrite them. How they were made (a pristine copy of the release)::

    mkdir /tmp/z010 && git archive <0.1.0 commit> | tar -x -C /tmp/z010
    PYTHONPATH=/tmp/z010 .venv/bin/python plugins/zephon-curricula/tests/data/checkpoint_0_1_0/make_checkpoint.py

It checks that the 2-rank run cut after ``CUT`` global steps and resumed gives the uninterrupted run's
global batches, and that every lane is in the middle of a window at the cut.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import zephon_core

HERE = Path(__file__).resolve().parent


def _builders() -> object:
    """This folder's ``builders.py`` (the frozen user script), loaded by path."""
    spec = importlib.util.spec_from_file_location("curricula_builders_0_1_0", HERE / "builders.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> int:
    out = [HERE / "checkpoint.json", HERE / "expected.json"]
    if any(p.exists() for p in out):
        print(
            f"refusing to overwrite {out[0].name} / {out[1].name}: they were written by zephon-core 0.1.0",
            file=sys.stderr,
        )
        return 2
    b: Any = _builders()
    CUT, STEPS, run = b.CUT, b.STEPS, b.run
    uninterrupted, _ = run(1, steps=STEPS)
    first, merged = run(2, steps=CUT)
    at_flush = [lane for lane, ls in merged["lanes"].items() if ls["skip"] == 0]
    if at_flush:
        raise SystemExit(f"lanes {at_flush} are at a window boundary after {CUT} steps; move the cut")
    rest, _ = run(2, steps=STEPS - CUT, resume=merged)
    if first + rest != uninterrupted:
        raise SystemExit("the 2-rank run cut and resumed does not give the uninterrupted batches")
    print(f"zephon_core {zephon_core.__version__} from {Path(zephon_core.__file__).parent}")
    made = {"zephon_core": zephon_core.__version__, "from": "43078108e7fb717b16cd411b2d30fd973cadb126"}
    expected = {"made_with": made, "fingerprint": merged["fingerprint"], "uninterrupted": uninterrupted}
    out[0].write_text(json.dumps(merged, indent=1, sort_keys=True) + "\n")
    out[1].write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
