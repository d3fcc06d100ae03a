"""Shuffle modes: quality on a label-sorted dataset, and what each costs in reads.

Quality: a dataset of ``--shards`` shards of ``--per-shard`` samples (default 20 x 500), shard ``s``
holding label ``s`` (files written in label order, the case a shuffle must undo). For each
``shuffle_block_size`` mode, over the source's global sequence (two epochs, ``exhaustion="repeat"``):
the fewest and mean distinct labels in any 1,024 consecutive samples (sliding), and the share of
non-overlapping 1,024-sample windows whose label counts pass a chi-square test against uniform
(p > 0.01), with the median p-value.

Cost: the same shuffled access pattern read through the pipeline,
``Pipeline(ws).fetch(parallelism=2, runner="threads").batch(32)`` with 2 lanes, from local files:

* Parquet: ``--files`` files of ``--docs-per-file`` corpus documents (``zephon_core.testing.corpus``),
  row groups of ``--row-group`` rows, zstd, written by pyarrow;
* LitData: the committed ``corpus_a`` fixture of ``plugins/zephon-litdata`` (two chunks of 600
  documents written by ``litdata.optimize``), its chunk files copied to ``--files`` chunks listed in
  one ``index.json`` (litdata itself is not needed to run this).

Per mode: samples/s (median of ``--repeat`` runs, modes interleaved so drift hits all alike), the
ratio to ``"shard"``, and the mean number of distinct files a chunk touches (chunk_size 256).

Run: ``python benchmarks/bench_shuffle.py`` (about a minute on 2 cores); prints Markdown tables.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from zephon_testkit.shuffle_quality import files_per_chunk, source_labels, window_quality  # noqa: E402

from zephon_core import Dataset, Pipeline, StaticMixtureWorkSource  # noqa: E402
from zephon_core.testing.corpus import documents  # noqa: E402

MODES: list[Any] = ["shard", 1024, "auto", "global"]
LITDATA_FIXTURE = ROOT / "plugins" / "zephon-litdata" / "tests" / "fixtures" / "data" / "corpus_a"
CHUNK = 256


def quality_table(shards: int, per_shard: int) -> list[str]:
    ds = Dataset.from_records("sorted", [{"label": i // per_shard} for i in range(shards * per_shard)], per_shard)
    rows = [
        "| mode | fewest labels in any 1,024 | mean labels per 1,024 | windows with p > 0.01 | median p | files per chunk |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for mode in MODES:
        ws = StaticMixtureWorkSource([ds], chunk_size=CHUNK, seed=0, shuffle_block_size=mode, exhaustion="repeat")
        q = window_quality(source_labels(ws, lambda d, s, i: s, limit=2 * shards * per_shard), 1024)
        files = files_per_chunk(ws, chunks=2 * shards * per_shard // CHUNK)
        rows.append(
            f"| {mode!r} | {q.min_distinct} of {shards} | {q.mean_distinct:.1f} | {q.share_uniform:.0%} "
            f"| {statistics.median(q.p_values):.2g} | {files:.1f} |"
        )
    return rows


def write_parquet(root: Path, files: int, per_file: int, row_group: int) -> Path:
    base = documents()
    out = root / "parquet"
    out.mkdir()
    for f in range(files):
        recs = [{"id": f * per_file + j, "text": base[(f * per_file + j) % len(base)]["text"]} for j in range(per_file)]
        pq.write_table(
            pa.Table.from_pylist(recs), out / f"part-{f:03d}.parquet", row_group_size=row_group, compression="zstd"
        )
    return out


def write_litdata(root: Path, files: int) -> Path:
    """The committed LitData fixture's chunk files, copied to ``files`` chunks under one index.json."""
    out = root / "litdata"
    out.mkdir()
    index = json.loads((LITDATA_FIXTURE / "index.json").read_text())
    src = index["chunks"]
    chunks = []
    for i in range(files):
        entry = dict(src[i % len(src)])
        name = f"chunk-0-{i}.bin"
        shutil.copyfile(LITDATA_FIXTURE / entry["filename"], out / name)
        entry["filename"] = name
        chunks.append(entry)
    index["chunks"] = chunks
    (out / "index.json").write_text(json.dumps(index))
    return out


def throughput(ds: Dataset, mode: Any) -> float:
    """Samples/s through fetch + batch(32), after the first microbatch (the pipeline is warm)."""
    ws = StaticMixtureWorkSource([ds], chunk_size=CHUNK, seed=3, shuffle_block_size=mode)
    with Pipeline(ws).fetch(parallelism=2, runner="threads").batch(32).options(lanes=2, runner="threads") as p:
        it = iter(p)
        next(it)
        t0 = time.perf_counter()
        n = sum(len(b) for b in it)
        return n / (time.perf_counter() - t0)


def cost_table(datasets: dict[str, Dataset], repeat: int) -> list[str]:
    rows = ["| format | mode | samples/s | time vs 'shard' | files per chunk |", "|---|---|---:|---:|---:|"]
    for fmt, ds in datasets.items():
        runs: dict[Any, list[float]] = {m: [] for m in MODES}
        for _ in range(repeat):
            for mode in MODES:
                runs[mode].append(throughput(ds, mode))
        base = statistics.median(runs["shard"])
        for mode in MODES:
            rate = statistics.median(runs[mode])
            files = files_per_chunk(StaticMixtureWorkSource([ds], chunk_size=CHUNK, seed=3, shuffle_block_size=mode))
            rows.append(f"| {fmt} | {mode!r} | {rate:,.0f} | {base / rate:.2f}x | {files:.1f} |")
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shards", type=int, default=20)
    ap.add_argument("--per-shard", type=int, default=500)
    ap.add_argument("--files", type=int, default=20)
    ap.add_argument("--docs-per-file", type=int, default=2000)
    ap.add_argument("--row-group", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"## Quality: {args.shards} shards x {args.per_shard} samples, shard s holds label s\n")
    print("\n".join(quality_table(args.shards, args.per_shard)))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        datasets = {
            "parquet": Dataset.from_path(
                "pq", str(write_parquet(root, args.files, args.docs_per_file, args.row_group))
            ),
            "litdata": Dataset.from_path("ld", str(write_litdata(root, args.files))),
        }
        sizes = ", ".join(f"{k}: {len(d.shards)} files, {d.num_samples} samples" for k, d in datasets.items())
        print(f"\n## Cost: fetch + batch(32), 2 lanes, threads, local files ({sizes}); median of {args.repeat}\n")
        print("\n".join(cost_table(datasets, args.repeat)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
