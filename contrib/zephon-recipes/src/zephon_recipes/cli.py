"""The ``zephon check``, ``run``, ``diff``, ``materialize`` and ``recipe-schema`` commands.

``check`` validates a recipe and prints its plan without reading any sample beyond what token
estimates need; ``run`` is a dry run (the pipeline runs for a few global steps, nothing trains);
``diff`` says which differences between two recipes change the data; ``recipe-schema`` writes the
JSON Schema editors use. Each takes the invocation's plugin manager, so what it validates against
is what ``zephon plugins`` lists.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from zephon_core import Pipeline, hash_global_batch
from zephon_core.plugin_api import ZephonPluginManager
from zephon_recipes.build import Recipe, read_recipe
from zephon_recipes.diff import diff, report
from zephon_recipes.document import load_document
from zephon_recipes.identity import record_in_manifest
from zephon_recipes.schema import recipe_schema


def _size(path: str) -> int | None:
    """Bytes on disk under a local dataset path (None for a remote URL)."""
    if "://" in path:
        return None
    p = Path(path)
    if p.is_file():
        return p.stat().st_size
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def _human(n: float | None, unit: str = "B") -> str:
    if n is None:
        return "?"
    for prefix in ("", "k", "M", "G", "T"):
        if abs(n) < 1000 or prefix == "T":
            return f"{n:,.0f} {prefix}{unit}".strip() if prefix == "" else f"{n:.1f} {prefix}{unit}"
        n /= 1000
    return f"{n:.1f} P{unit}"


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


def plan_text(recipe: Recipe, pipeline: Pipeline, *, estimate_tokens: bool = True) -> str:
    """The plan ``zephon check`` prints: datasets, mixture, stage graph, lanes per world size."""
    plan = recipe.plan
    source: Any = pipeline.source
    lines = [
        f"recipe {recipe.doc.files[-1]}"
        + (f" (over {', '.join(recipe.doc.files[:-1])})" if len(recipe.doc.files) > 1 else "")
        + ": valid"
    ]
    estimates = pipeline.calibrate() if estimate_tokens else None
    weights = source.target_weights() if hasattr(source, "target_weights") else {}
    weight_by = getattr(source, "weight_by", "samples")
    rows = [["DATASET", "FORMAT", "SHARDS", "SAMPLES", "SIZE", "WEIGHT", "EST. TOKENS", "TOKEN SHARE", "PATH"]]
    token_mass: dict[str, float] = {}
    if estimates:
        for d in source.datasets:
            w = weights.get(d.name, 0.0)
            token_mass[d.name] = w if weight_by == "tokens" else w * estimates.get(d.name, 0.0)
    total_mass = sum(token_mass.values()) or 1.0
    # a materialised prefix read back has no datasets of its own in the plan: its folder holds one per dataset
    paths = [dp.path for dp in plan.datasets] or [
        os.path.join(plan.materialized or "", d.name) for d in source.datasets
    ]
    for d, path in zip(source.datasets, paths):
        tps = (estimates or {}).get(d.name)
        rows.append(
            [
                d.name,
                d.format,
                str(len(d.shards)),
                f"{d.num_samples:,}",
                _human(_size(path)),
                f"{weights.get(d.name, 0.0):.3g}",
                _human(tps * d.num_samples, "") if tps else "-",
                f"{100 * token_mass[d.name] / total_mass:.1f}%" if d.name in token_mass else "-",
                path,
            ]
        )
    lines.append("datasets:")
    lines += _table(rows)
    described = source.describe()
    mix = {k: described[k] for k in ("weight_by", "exhaustion", "seed", "shuffle", "chunk_size") if k in described}
    lines.append(f"mixture ({type(source).__name__}): {json.dumps(mix, default=str)}")
    if plan.schedule is not None:
        for at, w in plan.schedule["breakpoints"]:
            lines.append(f"  from {at} {plan.schedule['unit']}: {json.dumps(w)}")
    opts = pipeline.run_options
    lines.append(f"stages (pipeline runner {opts.runner!r}):")
    srows = [["STEP", "KIND", "RUNNER", "PARALLELISM"]]
    packages = {s.operator: s.package for s in plan.steps}
    for step in pipeline.operators:
        kind = getattr(step, "kind", "") or type(step).__name__
        runner = getattr(step, "runner", None) or f"{opts.runner} (default)"
        label = f"{kind} ({packages[kind]})" if kind in packages else kind
        srows.append([str(getattr(step, "name", kind)), label, str(runner), str(getattr(step, "parallelism", 1))])
    lines += _table(srows)
    spec = pipeline.batch_spec
    if spec is not None:
        lines.append(
            f"batch: microbatches of {spec.microbatch_size} rows; {opts.lanes} lane(s): one global step is {opts.lanes} microbatch(es)"
        )
    for w in plan.world_sizes:
        lines.append(f"  on {w} rank(s): {opts.lanes // w} lane(s) per rank")
    return "\n".join(lines)


def check_command(args: argparse.Namespace, plugins: ZephonPluginManager) -> int:
    """``zephon check RECIPE``: validate, then print the plan."""
    recipe = read_recipe(args.recipe, args.set or (), plugins=plugins)
    if args.quiet:
        print(f"{args.recipe}: valid")
        return 0
    with recipe.build() as pipeline:
        print(plan_text(recipe, pipeline, estimate_tokens=not args.no_tokens))
    return 0


def run_command(args: argparse.Namespace, plugins: ZephonPluginManager) -> int:
    """``zephon run RECIPE --steps N``: a dry run printing throughput, padding and the realised mixture."""
    recipe = read_recipe(args.recipe, args.set or (), plugins=plugins)
    pipeline = recipe.build()
    if args.manifest:
        pipeline.options(manifest=args.manifest)
        record_in_manifest(args.manifest, recipe.identity)  # which recipe chose the samples the manifest lists
    lanes = pipeline.run_options.lanes // max(1, pipeline.run_options.dp_world_size)
    names = [d.name for d in pipeline.source.datasets]
    samples = dict.fromkeys(names, 0)
    tokens = dict.fromkeys(names, 0)
    rows = later = padding = cells = 0
    hashes: list[str] = []
    step: list[Any] = []
    t0 = time.perf_counter()
    first: float | None = None
    with pipeline:
        for b in pipeline:
            if first is None:
                first = time.perf_counter() - t0
            else:
                later += len(b)  # throughput is measured after the first batch: start-up is not a rate
            rows += len(b)
            data = b.data
            if "num_padding" in data:
                padding += int(np.asarray(data["num_padding"]).sum())
            if "input_ids" in data:
                cells += int(np.asarray(data["input_ids"]).size)
            owners = pipeline.datasets_of(b)
            segs = data.get("document_ids")
            for r, row in enumerate(owners):
                for name in row:
                    samples[name] += 1
                if segs is not None:
                    seg = np.asarray(segs[r])
                    counts = np.bincount(seg[seg >= 0], minlength=len(row))
                    for name, c in zip(row, counts.tolist()):
                        tokens[name] += c
            step.append(b)
            if len(step) == lanes:
                hashes.append(hash_global_batch(step))
                step = []
                if len(hashes) >= args.steps:
                    break
    dt = time.perf_counter() - t0
    print(
        f"ran {len(hashes)} global step(s) of {lanes} microbatch(es) on 1 rank in {dt:.2f} s (first batch after {first or 0:.2f} s)"
    )
    steady = max(dt - (first or 0.0), 1e-9)
    usable = (cells - padding) * later / max(1, rows)
    print(
        f"  throughput after the first batch: {later / steady:,.1f} rows/s"
        + (f", {usable / steady:,.0f} usable (non-padding) tokens/s" if cells else "")
    )
    if cells:
        print(f"  padding: {100 * padding / cells:.3f}% of {cells:,} token slots")
    total = sum(samples.values()) or 1
    print("  realised mixture (samples): " + ", ".join(f"{n} {100 * samples[n] / total:.1f}%" for n in names))
    if sum(tokens.values()):
        ttotal = sum(tokens.values())
        print("  realised mixture (tokens): " + ", ".join(f"{n} {100 * tokens[n] / ttotal:.1f}%" for n in names))
    if args.manifest:
        print(f"  provenance manifest: {args.manifest}")
    if args.hashes:
        for i, h in enumerate(hashes):
            print(f"  step {i}: {h}")
    return 0


def diff_command(args: argparse.Namespace, plugins: ZephonPluginManager) -> int:
    """``zephon diff A B``: exit 0 when the data is the same, 1 when a difference changes it."""
    a = load_document(args.a)
    b = load_document(args.b, args.set or ())
    differences = diff(a, b)
    print(report(differences))
    return 1 if any(d.changes_data for d in differences) else 0


def materialize_command(args: argparse.Namespace, plugins: ZephonPluginManager) -> int:
    """``zephon materialize RECIPE --until OP --to DIR``: write a prefix's records, resumably."""
    from zephon_recipes.materialize import materialize

    recipe = read_recipe(args.recipe, args.set or (), plugins=plugins)

    def progress(lane: int, shard: int) -> None:
        print(f"  lane {lane}: shard {shard} written", flush=True)

    report = materialize(
        recipe,
        args.to,
        until=args.until,
        format=args.format,
        chunks=args.chunks,
        shard_records=args.shard_records,
        plugins=plugins,
        on_shard=progress,
    )
    print(report)
    return 0


def schema_command(args: argparse.Namespace, plugins: ZephonPluginManager) -> int:
    """``zephon recipe-schema``: the JSON Schema of recipes with the installed plugins."""
    text = json.dumps(recipe_schema(plugins), indent=2, sort_keys=False)
    if args.output in (None, "-"):
        sys.stdout.write(text + "\n")
    else:
        Path(args.output).write_text(text + "\n")
        print(f"wrote {os.fspath(args.output)}")
    return 0
