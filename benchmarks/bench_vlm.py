"""The VLM pipeline in Zephon and in other loaders: same images, same work, same run, side by side.

The corpus is the one of ``zephon demo vlm`` (``contrib/zephon-vlm-demo``): captioned JPEGs
cut from the photographs bundled in scikit-image / scikit-learn, written as Parquet, WebDataset and
LitData. Two workloads, each over the first ``--samples`` samples in storage order:

* **decode**: fetch + decode + batch(8) (images of mixed sizes, so a batch is a list of arrays);
* **full**: fetch, decode, ``random_resized_crop(224)`` + ``horizontal_flip`` with a per-sample
  generator, ``patchify(14, merge 2)`` (Qwen2-VL layout), GPT-2 tokenization of the caption (+EOS),
  64 image placeholders before it, then batching. Zephon packs the samples into rows of 1,024 tokens
  (``pack_sequences(best_fit, image_token_id=...)``) and batches 2 rows with ``collate_multimodal``;
  the other loaders have no multimodal packing, so they batch 8 samples, padding the token ids to
  the longest and concatenating the patches. Usable tokens/s counts non-padding tokens.

Every loader runs the *same per-sample functions*: zephon-vision's decode / crop / flip / patchify
functions and zephon-tokenize's GPT-2 files, called directly where a loader has no such operator, so
the figures compare the loaders, not image libraries. Systems, 2 workers each where there is a
choice:

* ``zephon-threads`` / ``zephon-processes``: this repository, every operator ``parallelism=2``;
* ``zephon-fused``: the same on threads, but the per-sample steps fused into one ``map_transform``
  (the function the other loaders run, with the kernel's per-record ``rng``) before packing;
* ``grain``: ``grain.MapDataset.source(...).map(...).random_map(...)``, ``.to_iter_dataset()
  .batch(...).mp_prefetch(num_workers=2)``, over a map-style Parquet source;
* ``torch``: ``torch.utils.data.DataLoader(num_workers=2)`` over the same Parquet source;
* ``litdata``: ``litdata.StreamingDataset`` / ``StreamingDataLoader(num_workers=2)`` on the LitData copy;
* ``zephon-0.2.0-threads`` / ``-processes``: the published reference implementation ``zephon==0.2.0``
  (import name ``zephon``), when installed in its own venv (``--ref-python``, default
  ``/tmp/refvenv/bin/python``): ``map_transform`` steps with the same functions, ``batch``, and
  ``map_batch`` for the padding collate.

Each (system, workload) runs in a fresh process; the runs are interleaved (every system once, then
again) and the table shows the median of ``--repeat`` runs. Throughput is measured once half of the
samples have arrived, to the end (start-up, worker spawn and the first batch's latency are
reported apart).

    python benchmarks/bench_vlm.py [--samples 600] [--repeat 2] [--systems zephon-threads,grain]

Reference venv: ``python -m venv /tmp/refvenv && /tmp/refvenv/bin/pip install 'zephon[parquet]==0.2.0'
pillow tokenizers -c .ci/constraints.txt``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
HELPERS = [str(ROOT), str(ROOT / "plugins" / "zephon-vision" / "src"), str(ROOT / "plugins" / "zephon-tokenize" / "src")]
SYSTEMS = ("zephon-threads", "zephon-processes", "zephon-fused", "grain", "torch", "litdata", "zephon-0.2.0-threads", "zephon-0.2.0-processes")
WORKLOADS = ("decode", "full")
DECODE_BATCH = 8
FULL_BATCH = 8
IMAGE_SIZE = 224
SEQ = 1024
IMAGE_PAD = 50257
EOS = 50256
SEED = 7
GRAIN_THREADS = int(os.environ.get("BENCH_GRAIN_THREADS", "16"))  # grain.ReadOptions default: 16 per worker


# --------------------------------------------------------------------------------------------
# The per-sample work, shared by every non-Zephon loader (module level: picklable for workers).
# --------------------------------------------------------------------------------------------


class Work:
    """zephon-vision's functions (the same configuration as the demo's operators) and GPT-2."""

    def __init__(self) -> None:
        from zephon_tokenize.resolve import gpt2_tokenizer
        from zephon_vision.decode import DecodeImage
        from zephon_vision.geometry import HorizontalFlip, RandomResizedCrop
        from zephon_vision.patchify import Patchify

        self.decode = DecodeImage(field="jpg").fn
        self.crop = RandomResizedCrop(IMAGE_SIZE, scale=(0.25, 1.0), seed=11).fn
        self.flip = HorizontalFlip(seed=12).fn
        self.patchify = Patchify(
            14, temporal_patch_size=2, merge_size=2, min_pixels=IMAGE_SIZE**2, max_pixels=IMAGE_SIZE**2
        ).fn
        self.tok = gpt2_tokenizer()

    def decoded(self, row: dict[str, Any]) -> dict[str, Any]:
        return self.decode({"jpg": row["jpg"], "id": row["id"]})

    def augment(self, p: dict[str, Any], rng: np.random.Generator) -> dict[str, Any]:
        return self.flip(self.crop(p, rng), rng)

    def finish(self, p: dict[str, Any], caption: str) -> dict[str, Any]:
        p = self.patchify(p)
        grid = p["image_grid_thw"]
        ids = np.asarray([*self.tok.encode(caption).ids, EOS], dtype=np.int32)
        run = np.full(int(np.prod(grid)) // 4, IMAGE_PAD, dtype=np.int32)
        return {"input_ids": np.concatenate([run, ids]), "pixel_values": p["pixel_values"], "image_grid_thw": grid[None]}

    def full(self, row: dict[str, Any], rng: np.random.Generator | None = None) -> dict[str, Any]:
        if rng is None:
            rng = np.random.default_rng([SEED, int(row["id"])])
        return self.finish(self.augment(self.decoded(row), rng), row["txt"])


_WORK: Work | None = None


def work() -> Work:
    global _WORK
    if _WORK is None:
        _WORK = Work()
    return _WORK


def do_decode(row: dict[str, Any]) -> dict[str, Any]:
    return work().decoded(row)


def do_full(row: dict[str, Any]) -> dict[str, Any]:
    return work().full(row)


def do_full_rng(row: dict[str, Any], rng: np.random.Generator) -> dict[str, Any]:
    return work().full(row, rng)


def list_collate(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {"image": [r["image"] for r in rows]}


def pad_collate(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The unpacked batch: ids padded to the longest (-1), patches and grids concatenated."""
    n = max(len(r["input_ids"]) for r in rows)
    ids = np.full((len(rows), n), -1, dtype=np.int32)
    for i, r in enumerate(rows):
        ids[i, : len(r["input_ids"])] = r["input_ids"]
    return {
        "input_ids": ids,
        "pixel_values": np.concatenate([r["pixel_values"] for r in rows]),
        "image_grid_thw": np.concatenate([r["image_grid_thw"] for r in rows]),
    }


class ParquetRows:
    """A map-style source over the Parquet copy: row ``i`` in storage order; keeps the last 4 row groups."""

    def __init__(self, folder: str, limit: int) -> None:
        import pyarrow.parquet as pq

        self.files = sorted(str(p) for p in Path(folder).glob("*.parquet"))
        self.starts: list[tuple[str, int, int]] = []  # (file, row group, first row)
        at = 0
        for f in self.files:
            meta = pq.ParquetFile(f).metadata
            for g in range(meta.num_row_groups):
                self.starts.append((f, g, at))
                at += meta.row_group(g).num_rows
        self.n = min(limit, at)
        self._firsts = np.array([s[2] for s in self.starts])
        self._cache: dict[int, dict[str, list[Any]]] = {}  # the last few row groups read
        self._open: dict[str, Any] = {}
        self._lock = threading.Lock()  # Grain reads from several threads per worker: one reader at a time

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict[str, Any]:
        import pyarrow.parquet as pq

        g = int(np.searchsorted(self._firsts, i, side="right") - 1)
        with self._lock:
            if g not in self._cache:
                f, rg, _ = self.starts[g]
                if f not in self._open:
                    self._open[f] = pq.ParquetFile(f)
                self._cache[g] = self._open[f].read_row_group(rg).to_pydict()
                while len(self._cache) > 4:
                    del self._cache[min(self._cache)]
            cols = self._cache[g]
        k = i - self.starts[g][2]
        return {"jpg": cols["jpg"][k], "txt": cols["txt"][k], "id": cols["id"][k]}

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in ("_cache", "_open", "_lock")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _cache={}, _open={}, _lock=threading.Lock())


class TorchMap:
    """``torch.utils.data.Dataset`` wrapper: source row -> ``fn(row)``."""

    def __init__(self, src: ParquetRows, fn: Any) -> None:
        self.src, self.fn = src, fn

    def __len__(self) -> int:
        return len(self.src)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return self.fn(self.src[i])  # type: ignore[no-any-return]


# --------------------------------------------------------------------------------------------
# One measured run per process.
# --------------------------------------------------------------------------------------------


def _measure(batches: Any, count: Any, total: int, t_start: float) -> dict[str, float]:
    """Iterate ``batches`` until ``total`` samples; ``count(b)`` -> (samples, usable tokens, slots).

    Rates are measured from the batch that brings the count to half of ``total`` to the end: by
    then every loader is past its start-up and has drained what it prefetched before the first
    batch (a loader that buffers hundreds of samples would otherwise look faster than it produces). ``first_batch_s`` is the time from the start of the run to the first batch.
    """
    first = None
    first_batch = None
    seen = tokens = slots = 0
    seen0 = tokens0 = slots0 = 0
    for b in batches:
        s, t, sl = count(b)
        if first_batch is None:
            first_batch = time.perf_counter()
        seen, tokens, slots = seen + s, tokens + t, slots + sl
        if first is None and seen >= total // 2:  # past start-up and what the loader prefetched
            first = time.perf_counter()
            seen0, tokens0, slots0 = seen, tokens, slots
        if seen >= total:
            break
    end = time.perf_counter()
    assert first is not None and first_batch is not None
    dt = end - first
    return {
        "samples_per_s": (seen - seen0) / dt,
        "tokens_per_s": (tokens - tokens0) / dt,
        "padding": 1 - (tokens - tokens0) / max(1, slots - slots0),
        "first_batch_s": first_batch - t_start,
        "samples": seen,
        "seconds": dt,
    }


def _count_decode(b: Any) -> tuple[int, int, int]:
    data = b.data if hasattr(b, "data") else b
    return len(data["image"]), 0, 0


def _count_padded(b: Any) -> tuple[int, int, int]:
    ids = np.asarray(b["input_ids"])
    return ids.shape[0], int((ids >= 0).sum()), ids.size


def run_zephon(runner: str, workload: str, corpus: str, total: int, fused: bool = False) -> dict[str, float]:
    from zephon_pack import collate_multimodal
    from zephon_vlm_demo import vlm

    from zephon_core import Pipeline, StaticMixtureWorkSource
    from zephon_core.work.dataset import Dataset

    t0 = time.perf_counter()
    ds = Dataset.from_path("photos", str(Path(corpus) / "parquet"))
    ws = StaticMixtureWorkSource([ds], chunk_size=16, shuffle=False)
    if workload == "decode":
        p = Pipeline(ws)
        p = p.map_transform(do_decode, parallelism=2) if fused else p.decode_image(field="jpg", parallelism=2)
        p = p.batch(DECODE_BATCH, collate=list_collate)
        count = _count_decode
    else:
        if fused:
            p = (
                Pipeline(ws)
                .map_transform(do_full_rng, parallelism=2, seed=SEED)
                .pack_sequences(
                    SEQ, "best_fit", num_open_bins=vlm.OPEN_BINS, image_token_id=IMAGE_PAD, patch_dim=vlm.PATCH_DIM
                )
                .batch(vlm.MICROBATCH, collate=collate_multimodal)
            )
        else:
            p = vlm.build(ws, 2, seq=SEQ)

        def count(b: Any) -> tuple[int, int, int]:
            d = b.data
            return int(d["num_images"].sum()), int(d["input_ids"].size - d["num_padding"].sum()), d["input_ids"].size

    with p.options(lanes=2, runner=runner) as it:
        return _measure(it, count, total, t0)


def run_grain(workload: str, corpus: str, total: int) -> dict[str, float]:
    import grain

    t0 = time.perf_counter()
    ds = grain.MapDataset.source(ParquetRows(str(Path(corpus) / "parquet"), total))
    if workload == "decode":
        ds, fn, count = ds.map(do_decode), list_collate, _count_decode
    else:
        ds, fn, count = ds.random_map(do_full_rng, seed=SEED), pad_collate, _count_padded
    it = (
        ds.to_iter_dataset(grain.ReadOptions(num_threads=GRAIN_THREADS))
        .batch(DECODE_BATCH, batch_fn=fn)
        .mp_prefetch(grain.MultiprocessingOptions(num_workers=2))
    )
    return _measure(it, count, total, t0)


def run_torch(workload: str, corpus: str, total: int) -> dict[str, float]:
    from torch.utils.data import DataLoader

    t0 = time.perf_counter()
    src = ParquetRows(str(Path(corpus) / "parquet"), total)
    fn, collate, count = (do_decode, list_collate, _count_decode) if workload == "decode" else (do_full, pad_collate, _count_padded)
    dl = DataLoader(TorchMap(src, fn), batch_size=DECODE_BATCH, num_workers=2, collate_fn=collate)
    return _measure(dl, count, total, t0)


def run_litdata(workload: str, corpus: str, total: int) -> dict[str, float]:
    import litdata

    class Mapped(litdata.StreamingDataset):  # type: ignore[misc]
        def __getitem__(self, index: Any) -> Any:
            row = super().__getitem__(index)
            return do_decode(row) if workload == "decode" else do_full(row)

    t0 = time.perf_counter()
    cache = tempfile.mkdtemp(prefix="bench-vlm-litdata-")
    ds = Mapped(str(Path(corpus) / "litdata"), cache_dir=cache, shuffle=False)
    collate, count = (list_collate, _count_decode) if workload == "decode" else (pad_collate, _count_padded)
    dl = litdata.StreamingDataLoader(ds, batch_size=DECODE_BATCH, num_workers=2, collate_fn=collate)
    return _measure(dl, count, total, t0)


def run_reference(runner: str, workload: str, corpus: str, total: int) -> dict[str, float]:
    """zephon==0.2.0 (import name ``zephon``), in its own venv."""
    from zephon import Pipeline  # the reference implementation
    from zephon.io import Dataset
    from zephon.work import MixtureSpec, StaticMixtureWorkSource

    t0 = time.perf_counter()
    ds = Dataset.from_path("photos", str(Path(corpus) / "parquet"))
    ws = StaticMixtureWorkSource(
        datasets=[ds], mixture=MixtureSpec({"photos": 1.0}), chunk_size=16, seed=0, shuffle_shards=False
    )
    fn = do_decode if workload == "decode" else do_full
    p = Pipeline(ws).map_transform(fn, parallelism=2).batch(DECODE_BATCH)

    def payloads(b: Any) -> list[dict[str, Any]]:
        return [r.payload for r in b.records]

    if workload == "decode":

        def count(b: Any) -> tuple[int, int, int]:
            return _count_decode(list_collate(payloads(b)))

    else:

        def count(b: Any) -> tuple[int, int, int]:
            return _count_padded(pad_collate(payloads(b)))

    p = p.options(runner="threads" if runner == "threads" else "process")
    return _measure(iter(p), count, total, t0)


def worker(system: str, workload: str, corpus: str, total: int) -> dict[str, float]:
    if system.startswith("zephon-0.2.0"):
        return run_reference(system.rsplit("-", 1)[1], workload, corpus, total)
    if system == "zephon-fused":
        return run_zephon("threads", workload, corpus, total, fused=True)
    if system.startswith("zephon-"):
        return run_zephon(system.split("-", 1)[1], workload, corpus, total)
    return {"grain": run_grain, "torch": run_torch, "litdata": run_litdata}[system](workload, corpus, total)


# --------------------------------------------------------------------------------------------
# The driver.
# --------------------------------------------------------------------------------------------


def _spawn(python: str, system: str, workload: str, corpus: str, total: int, timeout: float) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([*HELPERS, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    cmd = [python, __file__, "--worker", system, workload, corpus, str(total)]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
    if out.returncode != 0 or not lines:
        tail = (out.stderr or out.stdout).strip().splitlines()[-3:]
        return {"error": " | ".join(tail)[-300:]}
    return dict(json.loads(lines[-1][len("RESULT ") :]))


def _available(system: str, ref_python: str) -> str | None:
    """None when ``system`` can run, else why not."""
    import importlib.util

    if system.startswith("zephon-0.2.0"):
        if not Path(ref_python).exists():
            return f"no reference venv at {ref_python}"
        check = subprocess.run([ref_python, "-c", "import zephon, pyarrow, PIL, tokenizers"], capture_output=True)
        return None if check.returncode == 0 else "zephon==0.2.0 (with pyarrow, pillow, tokenizers) not importable"
    module = {"grain": "grain", "torch": "torch", "litdata": "litdata"}.get(system)
    if module and importlib.util.find_spec(module) is None:
        return f"{module} is not installed"
    return None


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        system, workload, corpus, total = sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
        print("RESULT " + json.dumps(worker(system, workload, corpus, total)), flush=True)
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--images", type=int, default=2000, help="photographs in the corpus (default 2000)")
    ap.add_argument("--samples", type=int, default=600, help="samples per run (default 600)")
    ap.add_argument("--repeat", type=int, default=2, help="interleaved repeats; the table shows medians (default 2)")
    ap.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated subset of " + ", ".join(SYSTEMS))
    ap.add_argument("--workloads", default=",".join(WORKLOADS), help="decode, full or both")
    ap.add_argument("--ref-python", default="/tmp/refvenv/bin/python", help="python of the zephon==0.2.0 venv")
    ap.add_argument("--root", help="corpus cache folder (default $ZEPHON_DEMO_DIR or <tmp>/zephon-vlm-demo)")
    ap.add_argument("--timeout", type=float, default=300, help="per-run limit in seconds")
    args = ap.parse_args()

    from zephon_vlm_demo import corpus as corpus_mod

    c = corpus_mod.write(Path(args.root) if args.root else None, n=args.images, shard_size=max(10, args.images // 8))
    print(f"corpus: {c.describe()} (ready in {c.seconds:.1f} s) at {c.root}")
    systems = [s for s in args.systems.split(",") if s]
    workloads = [w for w in args.workloads.split(",") if w]
    unknown = sorted(set(systems) - set(SYSTEMS)) + sorted(set(workloads) - set(WORKLOADS))
    if unknown:
        ap.error(f"unknown system or workload {unknown}: systems are {', '.join(SYSTEMS)}; workloads decode, full")
    skipped = {s: why for s in systems if (why := _available(s, args.ref_python))}
    if "litdata" in c.skipped and "litdata" in systems:
        skipped["litdata"] = c.skipped["litdata"]
    for s, why in skipped.items():
        print(f"  {s}: skipped ({why})")
    runs = [s for s in systems if s not in skipped]
    print(f"cpu cores: {os.cpu_count()}, load average: {os.getloadavg()[0]:.1f} (start)")
    results: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in range(args.repeat):
        for workload in workloads:
            for system in runs:
                python = args.ref_python if system.startswith("zephon-0.2.0") else sys.executable
                t = time.perf_counter()
                res = _spawn(python, system, workload, str(c.root), args.samples, args.timeout)
                res["wall_s"] = time.perf_counter() - t  # the whole run: interpreter, imports, workers
                results.setdefault((system, workload), []).append(res)
                what = res.get("error") or f"{res['samples_per_s']:,.0f} samples/s"
                print(f"  [{r + 1}/{args.repeat}] {workload:6s} {system:24s} {what}  ({time.perf_counter() - t:.0f} s)", flush=True)
    print(f"load average: {os.getloadavg()[0]:.1f} (end)")
    print()
    print(table(results, runs, workloads, args))


def _median(runs: list[dict[str, Any]], key: str) -> float | None:
    vals = [r[key] for r in runs if "error" not in r]
    return statistics.median(vals) if vals else None


def table(results: dict[tuple[str, str], list[dict[str, Any]]], systems: list[str], workloads: list[str], args: Any) -> str:
    head = (
        f"| system | decode + batch({DECODE_BATCH}) samples/s | full pipeline samples/s | full: usable tokens/s | "
        "full: padding | full: first batch s | full: whole run s |"
    )
    rows = [head, "|---|---:|---:|---:|---:|---:|---:|"]

    def fmt(v: float | None, spec: str) -> str:
        return "—" if v is None else format(v, spec)

    for s in systems:
        dec = results.get((s, "decode"), [])
        full = results.get((s, "full"), [])
        pad = _median(full, "padding")
        cells = [
            fmt(_median(dec, "samples_per_s"), ",.0f") if "decode" in workloads else "—",
            fmt(_median(full, "samples_per_s"), ",.0f") if "full" in workloads else "—",
            fmt(_median(full, "tokens_per_s"), ",.0f") if "full" in workloads else "—",
            "—" if pad is None else f"{100 * pad:.1f}%",
            fmt(_median(full, "first_batch_s"), ".1f") if "full" in workloads else "—",
            fmt(_median(full, "wall_s"), ".0f") if "full" in workloads else "—",
        ]
        errors = [r["error"] for r in dec + full if "error" in r]
        name = s + (f" (error: {errors[0][:80]})" if errors else "")
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    rows.append("")
    rows.append(
        f"medians of {args.repeat} interleaved runs of {args.samples} samples each, rates from the "
        f"{args.samples // 2}th sample on"
    )
    return "\n".join(rows)


if __name__ == "__main__":
    main()
