"""Write the checkpoints of this folder with zephon-core 0.1.0. Run once; the files are evidence, not output.

Zephon promises that a checkpoint written by one release loads in a later one and resumes with the
same global batches on any world size. The files here were written by release 0.1.0 (the commit is
recorded in ``expected.json``) and are what ``tests/test_checkpoint_compat.py`` resumes with today's
code. Rewriting them with newer code would turn that test into a comparison of the new code with
itself, so this script refuses to overwrite an existing file unless ``--force`` is given, and
``--force`` is only right when regenerating with the 0.1.0 code itself.

How the files were made (a pristine checkout of the release, so nothing edited since is imported)::

    git worktree add /tmp/z010 <0.1.0 commit>
    cp -r tests/data /tmp/z010/tests/          # this folder's code into the release checkout
    R=/tmp/z010; P=$R/plugins
    PYTHONPATH=$R:$P/zephon-pack/src:$P/zephon-tokenize/src:$P/zephon-parquet/src:$P/zephon-jsonl/src \\
        .venv/bin/python $R/tests/data/checkpoints_0_1_0/make_checkpoints.py --out tests/data/checkpoints_0_1_0

The script puts its own checkout first on ``sys.path`` (the builders are imported from it) and prints
where ``zephon_core`` and the plugins were imported from. For every case of
:data:`~tests.data.checkpoints_0_1_0.builders.CASES` it

1. runs the pipeline uninterrupted on one rank and hashes every global batch;
2. runs it on 2 ranks for ``cut`` global steps, takes ``state_dict()`` on each rank (written as
   ``<case>.rank<r>-of-2.json``) and merges them with ``merge_checkpoints`` (``<case>.json``),
   checking that every lane is in the middle of a window (``skip > 0``), not at a flush;
3. resumes the merged checkpoint on 2 ranks and checks that the first run's steps plus the resumed
   ones are the uninterrupted run's.

``expected.json`` keeps, per case, both hash sequences and the checkpoint's fingerprint.
"""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(ROOT))  # the builders come from this checkout: tests.data.checkpoints_0_1_0.builders

from tests.data.checkpoints_0_1_0.builders import CASES, Case  # noqa: E402
from zephon_core import __version__, merge_checkpoints  # noqa: E402
from zephon_core.conformance.harness import run_global  # noqa: E402
from zephon_core.hashing import hash_global_batch  # noqa: E402
from zephon_core.runtime.types import SampleBatch  # noqa: E402

RELEASE = "0.1.0"
CHECKPOINT_WORLD = 2
"""The world size the checkpoints were taken on (the test resumes them on 1, 2 and 4)."""


def files_of(case: Case) -> list[str]:
    """The names this script writes for ``case``."""
    ranks = [f"{case.name}.rank{r}-of-{CHECKPOINT_WORLD}.json" for r in range(CHECKPOINT_WORLD)]
    return [f"{case.name}.json", *ranks]


def options(case: Case, rank: int, world: int, runner: str) -> dict[str, Any]:
    """The options a user of ``case`` sets on rank ``rank`` of ``world`` (never ``flush_every_k_chunks``
    when the case keeps the default)."""
    opts: dict[str, Any] = {"lanes": case.lanes, "dp_rank": rank, "dp_world_size": world, "runner": runner}
    if case.flush_every is not None:
        opts["flush_every_k_chunks"] = case.flush_every
    return opts


def take_checkpoint(case: Case) -> tuple[list[dict[str, Any]], list[str]]:
    """Every rank's ``state_dict()`` after ``case.cut`` global steps, and those steps' hashes."""
    per = case.lanes // CHECKPOINT_WORLD
    states: list[dict[str, Any]] = []
    delivered: list[list[SampleBatch]] = []
    for rank in range(CHECKPOINT_WORLD):
        with case.build(1).options(**options(case, rank, CHECKPOINT_WORLD, "inline")) as p:
            got: list[SampleBatch] = []
            for b in p:
                got.append(b)
                if len(got) == case.cut * per:
                    break
            states.append(p.state_dict())
        delivered.append(got)
    hashes = [hash_global_batch([b for r in delivered for b in r[t * per : (t + 1) * per]]) for t in range(case.cut)]
    return states, hashes


def make_case(case: Case) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """The files of ``case`` (name -> JSON data) and its entry of ``expected.json``; checks as it goes."""
    hashes = run_global(  # a repeating source never ends: its run is bounded by case.steps
        case.build, lanes=case.lanes, runner="threads", parallelism=2, flush_every=case.flush_every, steps=case.steps
    ).hashes
    if not case.cut < len(hashes):
        raise SystemExit(f"{case.name}: cut={case.cut} is not inside the run of {len(hashes)} global steps")
    states, first = take_checkpoint(case)
    merged = merge_checkpoints(states)
    at_flush = [lane for lane, ls in merged["lanes"].items() if ls["skip"] == 0]
    if at_flush:
        raise SystemExit(f"{case.name}: lanes {at_flush} are at a window boundary after {case.cut} steps; move the cut")
    rest = run_global(
        case.build,
        lanes=case.lanes,
        world_size=CHECKPOINT_WORLD,
        runner="threads",
        flush_every=case.flush_every,
        resume=merged,
        steps=None if case.steps is None else case.steps - case.cut,
    ).hashes
    if first != hashes[: case.cut] or rest != hashes[case.cut :]:
        raise SystemExit(f"{case.name}: the 2-rank run cut at {case.cut} does not give the uninterrupted batches")
    names = files_of(case)
    files = {names[0]: merged, **{name: s for name, s in zip(names[1:], states)}}
    entry = {
        "lanes": case.lanes,
        "flush_every_k_chunks": case.flush_every,
        "cut": case.cut,
        "steps": len(hashes),
        "fingerprint": merged["fingerprint"],
        "lane_positions": {lane: [ls["window"], ls["skip"], ls["delivered"]] for lane, ls in merged["lanes"].items()},
        "uninterrupted": hashes,
        "after_resume": rest,
    }
    return files, entry


def provenance() -> dict[str, Any]:
    """Which code wrote the files: the kernel's version, where it and the plugins came from, its commit."""
    import zephon_core

    where = {"zephon_core": str(Path(zephon_core.__file__).resolve().parent)}
    for name in sorted({p for c in CASES for p in c.plugins}):
        where[name] = str(Path(importlib.import_module(name).__file__ or "").resolve().parent)
    try:
        commit = subprocess.run(
            ["git", "-C", where["zephon_core"], "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    for name, path in where.items():
        print(f"{name}: {path}")
    return {"zephon_core": __version__, "commit": commit}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="folder to write to (default: this script's)")
    parser.add_argument("--force", action="store_true", help="overwrite existing files (only with the 0.1.0 code)")
    args = parser.parse_args(argv)
    out: Path = args.out
    targets = [out / n for c in CASES for n in files_of(c)] + [out / "expected.json"]
    existing = [str(t) for t in targets if t.exists()]
    if existing and not args.force:
        print(
            f"refusing to overwrite {', '.join(existing)}: they were written by zephon-core {RELEASE} and are the "
            "evidence the compatibility test resumes from; pass --force only when running the 0.1.0 code itself",
            file=sys.stderr,
        )
        return 2
    if __version__ != RELEASE:
        print(f"warning: zephon_core is {__version__}, not {RELEASE}", file=sys.stderr)
    made = provenance()
    expected: dict[str, Any] = {"made_with": made, "checkpoint_world_size": CHECKPOINT_WORLD, "cases": {}}
    out.mkdir(parents=True, exist_ok=True)
    for case in CASES:
        files, entry = make_case(case)
        for name, data in files.items():
            (out / name).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        expected["cases"][case.name] = entry
        print(f"{case.name}: {entry['steps']} global steps, checkpoint after {case.cut}: {entry['lane_positions']}")
    (out / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
