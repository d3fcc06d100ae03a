"""LitData and MDS through Zephon, side by side with ``litdata.StreamingDataset`` and ``streaming.LocalDataset``.

Runs in the *writers* environment, the one that has litdata, mosaicml-streaming and torch (never the
project venv); see ``plugins/zephon-litdata/tests/fixtures/make_fixtures.py`` for how to make it,
then install Zephon and the two plugins into it::

    /work/venvs/writers/bin/pip install -c /tmp/torch-pin.txt -e . -e plugins/zephon-litdata -e plugins/zephon-mds
    TMPDIR=$(mktemp -d) /work/venvs/writers/bin/python benchmarks/bench_litdata_mds.py [--samples 40000]

It writes one corpus (``id`` int, ``text`` ~400 characters, ``tokens`` 128 x int32) four times with
the libraries' own writers — LitData plain and zstd (``litdata.optimize``), MDS plain and zstd
(``MDSWriter``) — then measures, on the *same* access pattern (the shuffled order Zephon's work
source produces):

* shuffled fetch + batch(32) throughput in samples/s: Zephon's full pipeline vs the library's
  ``ds[i]`` in that order, collated into the same batches of 32 (the library over a shorter prefix
  of the same order, ``--library-measure``, because LitData's reader is slow on it);
* per-sample random read cost: one sample at a time at uniformly random positions.

Every figure is the median of ``--repeat`` runs, for data in the page cache; they print as a
Markdown table.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from peer_imports import streaming_base

WORDS = (
    "the quick brown fox jumps over a lazy dog while seven wizards quietly hex jolly boxers and "
    "every good data loader keeps its promises about order resume speed and memory"
).split()
BATCH = 32


def sample(i: int) -> dict[str, Any]:
    """Corpus sample ``i`` (deterministic)."""
    rng = random.Random(i)
    return {
        "id": i,
        "text": " ".join(rng.choice(WORDS) for _ in range(70))[:400],
        "tokens": np.frombuffer(rng.randbytes(512), dtype=np.int32).copy(),
    }


def write_litdata(out: str, n: int, compression: str | None) -> None:
    import litdata as ld

    ld.optimize(
        fn=sample,
        inputs=list(range(n)),
        output_dir=out,
        chunk_bytes="8MB",
        num_workers=1,
        compression=compression,
        verbose=False,
    )


def write_mds(out: str, n: int, compression: str | None) -> None:
    sb = streaming_base()
    columns = {"id": "int", "text": "str", "tokens": "ndarray:int32:128"}
    with sb.MDSWriter(out=out, columns=columns, compression=compression, size_limit=8 << 20) as w:
        for i in range(n):
            w.write(sample(i))


# -- access patterns ------------------------------------------------------------------------------
def zephon_order(ds: Any, limit: int) -> list[int]:
    """Global sample positions in the order Zephon's shuffled work source hands them out."""
    from zephon_core import StaticMixtureWorkSource

    ws = StaticMixtureWorkSource([ds], chunk_size=256, seed=0)
    starts = np.concatenate([[0], np.cumsum(ds.sizes)])
    order: list[int] = []
    g = 0
    while len(order) < limit:
        chunk = ws.chunk(g)
        if chunk is None:
            break
        order.extend((starts[chunk.shard] + chunk.index).tolist())
        g += 1
    return order[:limit]


def collate(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": np.array([r["id"] for r in rows]),
        "text": np.array([r["text"] for r in rows]),
        "tokens": np.stack([np.asarray(r["tokens"]) for r in rows]),
    }


def library_throughput(get: Callable[[int], Any], order: Sequence[int]) -> float:
    """samples/s of ``get(i)`` over ``order``, collated into batches of 32 like Zephon's batch(32)."""
    t0 = time.perf_counter()
    for start in range(0, len(order) - BATCH + 1, BATCH):
        collate([get(i) for i in order[start : start + BATCH]])
    return (len(order) // BATCH * BATCH) / (time.perf_counter() - t0)


def zephon_throughput(ds: Any, limit: int, parallelism: int) -> float:
    """samples/s of Zephon's shuffled fetch + batch(32), the first ``limit`` samples."""
    from zephon_core import Pipeline, StaticMixtureWorkSource

    ws = StaticMixtureWorkSource([ds], chunk_size=256, seed=0)
    pipe = Pipeline(ws).fetch(parallelism=parallelism, runner="threads").batch(BATCH).options(lanes=1)
    got = 0
    t0 = time.perf_counter()
    with pipe:
        for b in pipe:
            got += len(b)
            if got >= limit:
                break
    return got / (time.perf_counter() - t0)


def random_cost_us(get: Callable[[int], Any], n: int, count: int, seed: int = 0) -> float:
    """Mean microseconds to read one sample at a uniformly random position."""
    positions = np.random.default_rng(seed).integers(0, n, count).tolist()
    t0 = time.perf_counter()
    for i in positions:
        get(i)
    return (time.perf_counter() - t0) / count * 1e6


def zephon_getter(ds: Any) -> Callable[[int], Any]:
    starts = np.concatenate([[0], np.cumsum(ds.sizes)])
    reader = ds.reader

    def get(i: int) -> Any:
        shard = int(np.searchsorted(starts, i, side="right") - 1)
        return reader.read(shard, np.array([i - starts[shard]]))[0]

    return get


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=40_000, help="corpus size")
    parser.add_argument("--measure", type=int, default=10_000, help="samples per throughput measurement")
    parser.add_argument("--library-measure", type=int, default=5_000, help="samples per library measurement")
    parser.add_argument("--random", type=int, default=3_000, help="single-sample random reads")
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (the median is printed)")
    args = parser.parse_args()

    root = tempfile.mkdtemp(prefix="zephon-bench-")
    os.environ.setdefault("ZEPHON_CACHE_DIR", os.path.join(root, "cache"))
    n = args.samples
    print(f"writing {n} samples x 4 datasets under {root} ...", flush=True)
    layouts = {
        "litdata": lambda d: write_litdata(d, n, None),
        "litdata zstd": lambda d: write_litdata(d, n, "zstd"),
        "mds": lambda d: write_mds(d, n, None),
        "mds zstd": lambda d: write_mds(d, n, "zstd"),
    }
    rows = []
    for name, write in layouts.items():
        path = os.path.join(root, name.replace(" ", "-"))
        write(path)
        row = measure(name, path, root, args)
        z1, z2, lib_name, lib = row[1:5]
        rows.append(row)
        print(f"  {name}: zephon {z1:,.0f}/{z2:,.0f} samples/s, {lib_name} {lib:,.0f} samples/s", flush=True)
    print()
    print(
        "| dataset | Zephon fetch+batch(32), 1 thread | 2 threads | library reader | library, same order "
        "| Zephon random read | library random read |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, z1, z2, lib_name, lib, zr, lr in rows:
        print(f"| {name} | {z1:,.0f} /s | {z2:,.0f} /s | {lib_name} | {lib:,.0f} /s | {zr:,.1f} µs | {lr:,.1f} µs |")
    shutil.rmtree(root, ignore_errors=True)
    return 0


def median(fn: Callable[[int], float], repeat: int) -> float:
    """The median of ``fn(run)`` over ``repeat`` runs (this machine is small and noisy)."""
    return float(np.median([fn(k) for k in range(max(1, repeat))]))


def measure(name: str, path: str, root: str, args: argparse.Namespace) -> tuple[Any, ...]:
    """One table row: Zephon and the library reader on the same shuffled order, and random reads."""
    from zephon_core import Dataset

    ds = Dataset.from_path("bench", path)
    order = zephon_order(ds, args.library_measure)
    lib_name, lib_get = library_reader(name, path, root)
    zget = zephon_getter(ds)
    n, r = ds.num_samples, args.repeat
    z1 = median(lambda k: zephon_throughput(ds, args.measure, 1), r)
    z2 = median(lambda k: zephon_throughput(ds, args.measure, 2), r)
    lib = median(lambda k: library_throughput(lib_get, order), r)
    zr = median(lambda k: random_cost_us(zget, n, args.random, seed=k), r)
    lr = median(lambda k: random_cost_us(lib_get, n, args.random, seed=k), r)
    return (name, z1, z2, lib_name, lib, zr, lr)


def library_reader(name: str, path: str, root: str) -> tuple[str, Callable[[int], Any]]:
    """The format library's own random-access reader for one dataset."""
    if name.startswith("litdata"):
        import litdata as ld

        # LitData decompresses a local dataset's chunks in place: give it a copy.
        copy = shutil.copytree(path, path + "-litdata-copy")
        ds = ld.StreamingDataset(copy, cache_dir=os.path.join(root, "litdata-cache"))
        return "litdata.StreamingDataset", ds.__getitem__
    sb = streaming_base()
    if name == "mds zstd":
        # LocalDataset reads only uncompressed shards: give it Streaming's own decompression of them.
        import json

        from streaming.base.compression import decompress

        copy = path + "-raw"
        os.makedirs(copy)
        shutil.copy(os.path.join(path, "index.json"), copy)
        for s in json.load(open(os.path.join(path, "index.json")))["shards"]:
            with open(os.path.join(path, s["zip_data"]["basename"]), "rb") as f:
                raw = decompress(s["compression"], f.read())
            with open(os.path.join(copy, s["raw_data"]["basename"]), "wb") as f:
                f.write(raw)
        return "streaming.LocalDataset (pre-decompressed)", sb.LocalDataset(copy).__getitem__
    return "streaming.LocalDataset", sb.LocalDataset(path).__getitem__


if __name__ == "__main__":
    sys.exit(main())
