"""The loader's own CPU per sample: Zephon's runners against a plain loop doing the same work.

"The limit" of a workload is what the machine could do if the loader cost nothing: the CPU seconds
per sample of the same module-level functions in a plain single-process loop over the same bytes
in memory, collation included, with every core busy (``cores / cpu_per_sample``). What a loader
costs on top is its own overhead: record bookkeeping, queue hops, metrics, collation checks.

Cases:

* **A**: fetch + decode + ``batch(32)``: small JPEGs (96x96 px, PIL decode; a cheap numeric decode
  without Pillow) in Parquet files, read with ``Dataset.from_path``; the plain loop reads the same
  files into memory first, then decodes and stacks;
* **T**: fetch + ``batch(32)`` of 1 KB text records from memory (``Dataset.from_records``); the
  plain loop stacks the same records (a fixed-width unicode array, as the default collation makes).

The plain loop visits the rows in a seeded random order (a permutation, then each batch's rows
gathered by index), since a pipeline shuffles too: it is the cost of "shuffle and stack the same
records" in plain Python, which is what the loader's own overhead is measured against.

Systems: ``plain`` (the loop above), ``threads``, ``inline`` and ``processes``
(``options(runner=...)``, every step ``parallelism=2``). ``--base DIR`` adds ``threads@base``,
``inline@base`` and ``processes@base``: the same pipelines with ``PYTHONPATH=DIR`` (e.g. an
unpacked ``git archive`` of an earlier commit), so a change is measured against its baseline in
the same time window. The machine's load average (``os.getloadavg``) is printed with every figure:
on a shared machine samples/s move with it, CPU per sample much less.

``--ref-python PY`` adds ``ref`` to case T: the same fetch + ``batch(32)`` of the same records in
the reference implementation (``zephon==0.2.0``, installed in its own venv, whose interpreter is
``PY``), which yields records, not arrays: the benchmark stacks them as the plain loop does. Its
CPU is the training process's only (``time.process_time``; that venv has no psutil).

Each (case, system) runs in a fresh process; rounds are interleaved (every system once, then again,
in a rotated order) and the table shows medians. A run measures its steady state: the first
``--warmup`` samples (start-up, worker start, first batch) are not counted, then at least
``--samples`` samples. CPU per sample is measured with psutil for the training process and for its
child processes (the workers and the fork server) apart, so other load on a shared machine hardly
changes it, unlike samples/s.

    python benchmarks/bench_overhead.py [--quick] [--rounds 3] [--cases A,T] [--base /tmp/zephon-base]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

BATCH = 32
IMAGE_PX = 96
TEXT_BYTES = 1024
PARALLELISM = 2
CASES = ("A", "T")


# ------------------------------------------------------------------------------------------------
# The per-sample work (module level, so process workers import it by reference).
# ------------------------------------------------------------------------------------------------


def decode(row: dict[str, Any]) -> dict[str, Any]:
    """Decode one record's JPEG into an HxWx3 uint8 array (a cheap numeric decode without Pillow)."""
    data = row["jpg"]
    try:
        from PIL import Image
    except ImportError:  # no Pillow: a byte-level "decode" that still touches every byte
        arr = np.frombuffer(data, dtype=np.uint8)
        img = np.resize(arr, IMAGE_PX * IMAGE_PX * 3).reshape(IMAGE_PX, IMAGE_PX, 3)
        return {"image": img ^ np.uint8(0x55), "id": row["id"]}
    with Image.open(io.BytesIO(data)) as im:
        return {"image": np.asarray(im.convert("RGB")), "id": row["id"]}


def plain_collate(rows: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """The plain loop's collation: what ``default_collate`` produces, without its checks."""
    out: dict[str, np.ndarray] = {}
    for key in rows[0]:
        values = [r[key] for r in rows]
        out[key] = np.stack(values) if isinstance(values[0], np.ndarray) else np.asarray(values)
    return out


# ------------------------------------------------------------------------------------------------
# Data
# ------------------------------------------------------------------------------------------------


def text_records(n: int) -> list[dict[str, str]]:
    rng = np.random.default_rng(0)
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz      ", dtype=np.uint8)
    return [{"text": letters[rng.integers(0, 32, TEXT_BYTES)].tobytes().decode()} for _ in range(n)]


def write_parquet(folder: Path, n: int, files: int = 4) -> None:
    """``n`` small JPEGs (smooth gradients plus noise, so they compress like photographs) in ``files`` files."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(1)
    yy, xx = np.mgrid[0:IMAGE_PX, 0:IMAGE_PX]
    blobs: list[bytes] = []
    try:
        from PIL import Image
    except ImportError:
        Image = None  # type: ignore[assignment]
    for _ in range(64):  # a pool of distinct images, reused: encoding is not what is measured
        base = (xx * rng.uniform(0.5, 2.5) + yy * rng.uniform(0.5, 2.5))[..., None] * rng.uniform(0.3, 1.0, 3)
        img = np.clip(base + rng.normal(0, 12, (IMAGE_PX, IMAGE_PX, 3)), 0, 255).astype(np.uint8)
        if Image is None:
            blobs.append(img.tobytes()[: IMAGE_PX * IMAGE_PX])
        else:
            buf = io.BytesIO()
            Image.fromarray(img).save(buf, format="JPEG", quality=85)
            blobs.append(buf.getvalue())
    folder.mkdir(parents=True, exist_ok=True)
    per = -(-n // files)
    for f in range(files):
        ids = list(range(f * per, min(n, (f + 1) * per)))
        table = pa.table({"id": pa.array(ids, pa.int64()), "jpg": pa.array([blobs[i % 64] for i in ids], pa.binary())})
        pq.write_table(table, folder / f"part-{f:02d}.parquet", row_group_size=256)


def parquet_rows(folder: Path) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    rows: list[dict[str, Any]] = []
    for p in sorted(folder.glob("*.parquet")):
        rows.extend(pq.read_table(p).to_pylist())
    return rows


# ------------------------------------------------------------------------------------------------
# One measurement (in a fresh process)
# ------------------------------------------------------------------------------------------------


def _cpu() -> tuple[float, float]:
    """(CPU seconds of this process, CPU seconds of its live descendants: workers, the fork server)."""
    import psutil  # type: ignore[import-untyped]

    me = psutil.Process()
    t = me.cpu_times()
    own = t.user + t.system
    kids = 0.0
    for c in me.children(recursive=True):
        try:
            ct = c.cpu_times()
            kids += ct.user + ct.system
        except psutil.Error:
            continue
    return own, kids


def run_plain(case: str, data: Path, warmup: int, samples: int) -> dict[str, float]:
    rows = parquet_rows(data) if case == "A" else text_records(warmup + samples + 64 * BATCH)
    fn = decode if case == "A" else None
    order = np.random.default_rng(0).permutation(len(rows)).tolist()  # the shuffle a pipeline does too
    held: list[dict[str, Any]] = []
    n = 0
    t0 = c0 = 0.0
    for i in order:
        row = rows[i]
        held.append(fn(row) if fn is not None else row)
        if len(held) == BATCH:
            plain_collate(held)
            held = []
            n += BATCH
            if n == warmup // BATCH * BATCH:
                t0, c0 = time.perf_counter(), time.process_time()
            if n >= warmup // BATCH * BATCH + samples:
                break
    counted = n - warmup // BATCH * BATCH
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"samples": counted, "sps": counted / wall, "own_ms": 1e3 * cpu / counted, "kids_ms": 0.0}


def run_zephon(case: str, runner: str, data: Path, warmup: int, samples: int) -> dict[str, Any]:
    import zephon_core
    from zephon_core import Dataset, MixtureSpec, Pipeline, StaticMixtureWorkSource

    if case == "A":
        ds = Dataset.from_path("img", str(data), format="parquet")
    else:
        ds = Dataset.from_records("text", text_records(warmup + samples + 64 * BATCH), shard_size=4096)
    ws = StaticMixtureWorkSource([ds], mixture=MixtureSpec({ds.name: 1.0}), chunk_size=1024, seed=0)
    p = Pipeline(ws).fetch(parallelism=PARALLELISM)
    if case == "A":
        p = p.map_transform(decode, parallelism=PARALLELISM)
    p = p.batch(BATCH, parallelism=PARALLELISM).options(runner=runner)
    n = 0
    started = False
    t0 = own0 = kids0 = 0.0
    with p:
        for b in p:
            n += len(b)
            if not started and n >= warmup:
                started, n0 = True, n
                t0 = time.perf_counter()
                own0, kids0 = _cpu()
            if started and n - n0 >= samples:
                break
        wall = time.perf_counter() - t0
        own, kids = _cpu()
    counted = n - n0
    return {
        "samples": counted,
        "sps": counted / wall,
        "own_ms": 1e3 * (own - own0) / counted,
        "kids_ms": 1e3 * (kids - kids0) / counted,
        "kernel": str(Path(zephon_core.__file__).parents[1]),
    }


def run_ref(warmup: int, samples: int) -> dict[str, Any]:
    """Case T on the reference implementation (``zephon==0.2.0``: another API, records out)."""
    import zephon  # type: ignore[import-not-found]

    recs = text_records(warmup + samples + 64 * BATCH)
    shards = {i: zephon.InMemoryShard(recs[i * 4096 : (i + 1) * 4096]) for i in range(-(-len(recs) // 4096))}
    ds = zephon.Dataset.from_dict("text", shards)
    ws = zephon.StaticMixtureWorkSource([ds], mixture=zephon.MixtureSpec({"text": 1.0}), chunk_size=1024, seed=0)
    n = n0 = 0
    t0 = c0 = 0.0
    for b in zephon.Pipeline(ws).fetch(parallelism=PARALLELISM).batch(BATCH):
        plain_collate([r.payload for r in b.records])
        n += len(b)
        if not n0 and n >= warmup:
            n0, t0, c0 = n, time.perf_counter(), time.process_time()
        if n0 and n - n0 >= samples:
            break
    counted = n - n0
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"samples": counted, "sps": counted / wall, "own_ms": 1e3 * cpu / counted, "kids_ms": 0.0}


TEXT_SCALE = 20
"""Case T is ~100x cheaper per sample than A: it counts this many times more samples (a window of
2,000 such samples would last a few milliseconds, shorter than the CPU clock's resolution)."""


def child(args: argparse.Namespace) -> None:
    case, system = args.child.split(":")
    data = Path(args.data)
    if case == "T":
        args.warmup, args.samples = args.warmup * TEXT_SCALE, args.samples * TEXT_SCALE
    if system == "plain":
        out: dict[str, Any] = run_plain(case, data, args.warmup, args.samples)
    elif system == "ref":
        out = run_ref(args.warmup, args.samples)
    else:
        out = run_zephon(case, system.split("@")[0], data, args.warmup, args.samples)
    print("RESULT " + json.dumps(out), flush=True)


# ------------------------------------------------------------------------------------------------
# The driver: interleaved rounds, one fresh process per measurement
# ------------------------------------------------------------------------------------------------


def measure(case: str, system: str, data: Path, args: argparse.Namespace) -> dict[str, Any] | None:
    env = dict(os.environ)
    if system.endswith("@base"):
        env["PYTHONPATH"] = os.pathsep.join([args.base, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    python = args.ref_python if system == "ref" else sys.executable
    cmd = [python, __file__, "--child", f"{case}:{system}", "--data", str(data)]
    cmd += ["--warmup", str(args.warmup), "--samples", str(args.samples)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return dict(json.loads(line[7:]))
    print(f"  {case}/{system} failed (exit {proc.returncode}): {proc.stderr.strip()[-600:]}", file=sys.stderr)
    return None


def _load() -> str:
    """The 1, 5 and 15 minute load averages, as ``uptime`` shows them."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="100-sample warm-up, 600 samples, 1 round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--samples", type=int, default=2000)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--systems", default="plain,threads,inline,processes")
    ap.add_argument("--base", default=None, help="a kernel tree to compare against (adds <runner>@base systems)")
    ap.add_argument("--ref-python", default=None, help="interpreter of a venv with zephon==0.2.0 (adds ref to case T)")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--data", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    if args.quick:
        args.warmup, args.samples, args.rounds = 100, 600, 1
    cases = [c.strip().upper() for c in args.cases.split(",") if c.strip()]
    bad = [c for c in cases if c not in CASES]
    if bad:
        ap.error(f"--cases: unknown case {bad[0]!r}; choose from {', '.join(CASES)}")
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    if args.base:
        if not Path(args.base, "zephon_core").is_dir():
            ap.error(f"--base {args.base}: no zephon_core package in that folder")
        systems += [f"{s}@base" for s in systems if s in ("threads", "inline", "processes")]
    if args.ref_python:
        if not Path(args.ref_python).is_file():
            ap.error(f"--ref-python {args.ref_python}: no such interpreter")
        systems.append("ref")
    cores = os.cpu_count() or 1
    results: dict[tuple[str, str], list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="zephon-bench-overhead-") as tmp:
        data = Path(tmp, "a")
        # Every lane leaves up to one partial microbatch over: enough records for the counted samples.
        write_parquet(data, int((args.warmup + args.samples) * 1.3) + 64 * BATCH)
        for r in range(args.rounds):
            order = systems[r % len(systems) :] + systems[: r % len(systems)]
            for case in cases:
                for system in order:
                    if system == "ref" and case != "T":
                        continue
                    res = measure(case, system, data, args)
                    if res is not None:
                        results.setdefault((case, system), []).append(res)
                        print(
                            f"  round {r + 1} {case} {system:15s} {res['sps']:>10,.0f} samples/s  "
                            f"cpu {1e3 * (res['own_ms'] + res['kids_ms']):.2f} us/sample  load {_load()}",
                            flush=True,
                        )
    scale = f" (case T: {args.samples * TEXT_SCALE} after {args.warmup * TEXT_SCALE})" if "T" in cases else ""
    print(
        f"\n{cores} cores; medians of {args.rounds} round(s); {args.samples} samples after {args.warmup}{scale}; "
        f"load average at the end {_load()}"
    )
    head = (
        "| case | system | samples/s | vs limit | vs plain loop | CPU us/sample: training | workers | total "
        "| total vs plain |"
    )
    print(head)
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for case in cases:
        plain = results.get((case, "plain"))
        plain_sps = statistics.median(r["sps"] for r in plain) if plain else None
        plain_cpu = statistics.median(r["own_ms"] for r in plain) if plain else None
        limit = cores / plain_cpu * 1e3 if plain_cpu else None
        if limit:
            print(f"| {case} | **the limit** ({cores} / plain CPU) | {limit:,.0f} | 1.00x | | | | | |")
        for system in systems:
            rs = results.get((case, system))
            if not rs:
                continue
            sps = statistics.median(r["sps"] for r in rs)
            own = statistics.median(r["own_ms"] for r in rs)
            kids = statistics.median(r["kids_ms"] for r in rs)
            total = statistics.median(r["own_ms"] + r["kids_ms"] for r in rs)
            vs_limit = f"{sps / limit:.2f}x" if limit else "-"
            vs_plain = f"{sps / plain_sps:.2f}x" if plain_sps else "-"
            vs_cpu = f"{total / plain_cpu:.2f}x" if plain_cpu else "-"
            print(
                f"| {case} | {system} | {sps:,.0f} | {vs_limit} | {vs_plain} | {1e3 * own:.2f} | {1e3 * kids:.2f} "
                f"| {1e3 * total:.2f} "
                f"| {vs_cpu} |"
            )
    ref = results.get(("T", "ref"))
    if ref:  # samples/s against the reference implementation, in the same run
        ref_sps = statistics.median(r["sps"] for r in ref)
        for system in systems:
            rs = results.get(("T", system))
            if rs and system != "ref":
                print(f"T: {system} vs ref (zephon 0.2.0): {statistics.median(r['sps'] for r in rs) / ref_sps:.2f}x")


if __name__ == "__main__":
    main()
