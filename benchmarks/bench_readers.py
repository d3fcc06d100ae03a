"""Reader plugins: shuffled fetch + batch(32) throughput and per-sample random read cost, per format,
side by side with each library's own reader on the same access pattern, in one run.

Data: the shared offline corpus (:mod:`zephon_core.testing.corpus`, Shakespeare paragraphs), repeated to ``--docs``
documents, written with each library's own writer into 4 shards: JSON Lines (plain), Parquet (pyarrow,
row groups of ``--row-group`` rows, zstd) and Vortex (``vortex.io.write``).

Access pattern: the pointer sequence of a ``StaticMixtureWorkSource`` (shuffled shard order, blocks of
1024 shuffled within shards), cut into batches of 32. Measured per format:

* ``zephon pipeline``: ``Pipeline(ws).fetch(parallelism=2, runner="threads").batch(32)``, samples/s;
* ``zephon reader``: ``Reader.read`` per batch of 32 on the same sequence, samples/s; and the cost of
  one uniformly random single-sample read (µs);
* library baselines on the same batches: Parquet naive per-row (``ParquetFile.read_row_group(g)``
  then ``take([row])``), and ``pq.read_table`` + ``Table.take`` (load time included); Vortex
  per-row ``scan(indices=[i])`` and one ``scan(indices=batch)`` per batch, and full ``scan()`` +
  take; JSON Lines: stdlib ``readlines`` + ``json.loads`` per sample (load time included).

Run: ``python benchmarks/bench_readers.py`` (about a minute on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import vortex as vx

from zephon_core import Dataset, MixtureSpec, Pipeline, StaticMixtureWorkSource
from zephon_core.testing.corpus import documents

SHARDS = 4


def corpus(n: int) -> list[dict]:
    base = documents()
    return [{"id": i, "text": base[i % len(base)]["text"], "source": base[i % len(base)]["source"]} for i in range(n)]


def write_all(root: Path, docs: list[dict], row_group: int) -> dict[str, Path]:
    parts = np.array_split(np.arange(len(docs)), SHARDS)
    out = {f: root / f for f in ("jsonl", "parquet", "vortex")}
    for p in out.values():
        p.mkdir()
    for k, idx in enumerate(parts):
        recs = [docs[i] for i in idx.tolist()]
        with open(out["jsonl"] / f"part-{k}.jsonl", "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in recs)
        table = pa.Table.from_pylist(recs)
        pq.write_table(table, out["parquet"] / f"part-{k}.parquet", row_group_size=row_group, compression="zstd")
        vx.io.write(vx.array(table), str(out["vortex"] / f"part-{k}.vortex"))
    return out


def batches_of(ds: Dataset, chunk_size: int = 1024) -> list[tuple[np.ndarray, np.ndarray]]:
    """The work source's pointer sequence, as batches of 32 (shard, index) arrays."""
    ws = StaticMixtureWorkSource([ds], mixture=MixtureSpec({ds.name: 1.0}), chunk_size=chunk_size, seed=3)
    shard, index = [], []
    g = 0
    while (ch := ws.chunk(g)) is not None:
        shard.append(ch.shard)
        index.append(ch.index)
        g += 1
    s, i = np.concatenate(shard), np.concatenate(index)
    return [(s[k : k + 32], i[k : k + 32]) for k in range(0, len(s), 32)]


def by_shard(shard: np.ndarray, index: np.ndarray) -> list[tuple[int, np.ndarray, np.ndarray]]:
    out = []
    for s in np.unique(shard).tolist():
        pos = np.flatnonzero(shard == s)
        out.append((s, pos, index[pos]))
    return out


def rate(fn: Callable[[list[tuple[np.ndarray, np.ndarray]]], int], batches: list, budget: float) -> float:
    """Samples/s of ``fn`` over a prefix of ``batches`` that fits roughly in ``budget`` seconds."""
    t0 = time.perf_counter()
    n = fn(batches[:4])
    probe = max(time.perf_counter() - t0, 1e-6) / max(n, 1)
    take = max(4, min(len(batches), int(budget / probe / 32)))
    t0 = time.perf_counter()
    n = fn(batches[:take])
    return n / (time.perf_counter() - t0)


def zephon_pipeline(ds: Dataset) -> float:
    ws = StaticMixtureWorkSource([ds], mixture=MixtureSpec({ds.name: 1.0}), chunk_size=1024, seed=3)
    p = Pipeline(ws).fetch(parallelism=2, runner="threads").batch(32).options(lanes=2, runner="threads")
    with p:
        it = iter(p)
        next(it)
        t0 = time.perf_counter()
        n = sum(len(b) for b in it)
        return n / (time.perf_counter() - t0)


def zephon_reader(ds: Dataset) -> Callable[[list], int]:
    def run(batches: list) -> int:
        n = 0
        for shard, index in batches:
            for s, _pos, idx in by_shard(shard, index):
                n += len(ds.reader.read(s, idx))
        return n

    return run


def random_single(read_one: Callable[[int, int], object], sizes: list[int], n: int = 300) -> float:
    """µs per uniformly random single-sample read."""
    rng = np.random.default_rng(11)
    picks = [(int(s), int(rng.integers(0, sizes[s]))) for s in rng.integers(0, len(sizes), n)]
    read_one(*picks[0])
    t0 = time.perf_counter()
    for s, i in picks:
        read_one(s, i)
    return (time.perf_counter() - t0) / n * 1e6


# -- library baselines -------------------------------------------------------------------------------
def parquet_naive(files: list[str]) -> tuple[Callable[[list], int], Callable[[int, int], object]]:
    pfs = [pq.ParquetFile(f) for f in files]
    starts = [
        np.concatenate([[0], np.cumsum([m.row_group(g).num_rows for g in range(m.num_row_groups)])])
        for m in (p.metadata for p in pfs)
    ]

    def one(s: int, i: int) -> object:
        g = int(np.searchsorted(starts[s], i, side="right") - 1)
        return pfs[s].read_row_group(g).take([i - int(starts[s][g])]).to_pylist()[0]

    def run(batches: list) -> int:
        n = 0
        for shard, index in batches:
            for s, i in zip(shard.tolist(), index.tolist()):
                one(s, i)
                n += 1
        return n

    return run, one


def parquet_full_table(files: list[str]) -> tuple[Callable[[list], int], float]:
    t0 = time.perf_counter()
    tables = [pq.read_table(f) for f in files]
    load = time.perf_counter() - t0

    def run(batches: list) -> int:
        n = 0
        for shard, index in batches:
            for s, _pos, idx in by_shard(shard, index):
                n += len(tables[s].take(pa.array(idx)).to_pylist())
        return n

    return run, load


def vortex_per_row(files: list[str]) -> tuple[Callable[[list], int], Callable[[int, int], object]]:
    vfs = [vx.open(f) for f in files]

    def one(s: int, i: int) -> object:
        return vfs[s].scan(indices=vx.array(pa.array([i], pa.uint64()))).read_all().to_arrow_table().to_pylist()[0]

    def run(batches: list) -> int:
        n = 0
        for shard, index in batches:
            for s, i in zip(shard.tolist(), index.tolist()):
                one(s, i)
                n += 1
        return n

    return run, one


def vortex_batch_scan(files: list[str]) -> Callable[[list], int]:
    vfs = [vx.open(f) for f in files]

    def run(batches: list) -> int:
        n = 0
        for shard, index in batches:
            for s, _pos, idx in by_shard(shard, index):
                rows = vfs[s].scan(indices=vx.array(pa.array(np.sort(idx).astype(np.uint64)))).read_all()
                n += len(rows.to_arrow_table().to_pylist())
        return n

    return run


def vortex_full_scan(files: list[str]) -> tuple[Callable[[list], int], float]:
    t0 = time.perf_counter()
    rows = [vx.open(f).scan().read_all().to_arrow_table().to_pylist() for f in files]
    load = time.perf_counter() - t0

    def run(batches: list) -> int:
        n = 0
        for shard, index in batches:
            for s, i in zip(shard.tolist(), index.tolist()):
                _ = rows[s][i]
                n += 1
        return n

    return run, load


def jsonl_stdlib(files: list[str]) -> tuple[Callable[[list], int], float]:
    t0 = time.perf_counter()
    lines = [open(f, "rb").readlines() for f in files]
    load = time.perf_counter() - t0

    def run(batches: list) -> int:
        n = 0
        for shard, index in batches:
            for s, i in zip(shard.tolist(), index.tolist()):
                json.loads(lines[s][i])
                n += 1
        return n

    return run, load


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=int, default=200_000)
    ap.add_argument("--row-group", type=int, default=16_384)
    ap.add_argument("--budget", type=float, default=3.0, help="seconds per slow baseline measurement")
    args = ap.parse_args()
    docs = corpus(args.docs)
    tmp = Path(tempfile.mkdtemp(prefix="zephon-bench-"))
    os.environ.setdefault("ZEPHON_CACHE_DIR", str(tmp / "cache"))
    t0 = time.perf_counter()
    paths = write_all(tmp, docs, args.row_group)
    mb = {f: sum(p.stat().st_size for p in paths[f].iterdir()) / 1e6 for f in paths}
    print(
        f"corpus: {len(docs)} documents, mean {np.mean([len(d['text']) for d in docs]):.0f} chars, "
        f"{SHARDS} shards; written in {time.perf_counter() - t0:.1f}s "
        f"(jsonl {mb['jsonl']:.1f} MB, parquet {mb['parquet']:.1f} MB, vortex {mb['vortex']:.1f} MB)"
    )
    rows: list[tuple[str, str, str, str]] = []

    def add(fmt: str, what: str, sps: float | None, us: float | None, note: str = "") -> None:
        rows.append((fmt, what, f"{sps:,.0f}" if sps else "-", f"{us:,.1f}" if us else "-", note))
        print(
            f"  {fmt:8s} {what:44s} {rows[-1][2]:>12s} samples/s  {rows[-1][3]:>9s} µs/random sample  {note}",
            flush=True,
        )

    results: dict[str, float] = {}
    for fmt in ("jsonl", "parquet", "vortex"):
        t0 = time.perf_counter()
        ds = Dataset.from_path(fmt, str(paths[fmt]))
        open_s = time.perf_counter() - t0
        files = [str(paths[fmt] / s.id) for s in ds.shards]
        batches = batches_of(ds)
        sizes = [s.num_samples for s in ds.shards]
        reader_one = lambda s, i, r=ds.reader: r.read(s, np.array([i]))  # noqa: E731
        results[fmt] = zephon_pipeline(ds)
        add(fmt, "zephon pipeline fetch(2 threads)+batch(32)", results[fmt], None, f"open {open_s:.2f}s")
        add(
            fmt,
            "zephon reader, batches of 32",
            rate(zephon_reader(ds), batches, args.budget),
            random_single(reader_one, sizes),
        )
        if fmt == "jsonl":
            run, load = jsonl_stdlib(files)
            add(
                fmt,
                "stdlib readlines + json.loads per sample",
                rate(run, batches, args.budget),
                None,
                f"+ {load:.2f}s load, all in RAM",
            )
        elif fmt == "parquet":
            run, one = parquet_naive(files)
            add(
                fmt,
                "pyarrow read_row_group + take per row",
                rate(run, batches, args.budget),
                random_single(one, sizes, 60),
            )
            run, load = parquet_full_table(files)
            add(
                fmt,
                "pyarrow read_table + Table.take per batch",
                rate(run, batches, args.budget),
                None,
                f"+ {load:.2f}s load, all in RAM",
            )
        else:
            run, one = vortex_per_row(files)
            add(fmt, "vortex scan(indices=[i]) per row", rate(run, batches, args.budget), random_single(one, sizes))
            add(fmt, "vortex scan(indices=batch) per batch", rate(vortex_batch_scan(files), batches, args.budget), None)
            run, load = vortex_full_scan(files)
            add(
                fmt,
                "vortex full scan + index per row",
                rate(run, batches, args.budget),
                None,
                f"+ {load:.2f}s load, all in RAM",
            )
    print(
        f"parquet / jsonl pipeline throughput: {results['parquet'] / results['jsonl']:.2f}x; "
        f"vortex / jsonl: {results['vortex'] / results['jsonl']:.2f}x"
    )


if __name__ == "__main__":
    main()
