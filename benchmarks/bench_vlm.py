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
* ``mosaic``: Mosaic Streaming's ``StreamingDataset`` (``shuffle=False``) over an MDS copy of the corpus
  (columns ``jpg`` bytes, ``txt`` str, ``id`` int, written once with ``MDSWriter`` into ``<corpus>/mds``),
  read by a plain ``torch.utils.data.DataLoader(num_workers=2)``; in its own venv (``--mosaic-python``);
* ``energon``: Megatron-Energon's ``get_train_dataset`` / ``get_loader`` (``WorkerConfig`` with 2 workers)
  over the WebDataset copy, prepared once with ``energon prepare`` as a ``CrudeWebdataset``; a task
  encoder with a cooker, no decoder, the same functions as ``encode_sample`` and the collate as
  ``batch``; no shuffle buffer, no shard shuffling; in its own venv (``--energon-python``);
* ``zephon-0.2.0-threads`` / ``-processes``: the published reference implementation ``zephon==0.2.0``
  (import name ``zephon``), when installed in its own venv (``--ref-python``, default
  ``/tmp/refvenv/bin/python``): ``map_transform`` steps with the same functions, ``batch``, and
  ``map_batch`` for the padding collate.

Each (system, workload) runs in a fresh process; the runs are interleaved (every system once, then
again) and the table shows the median of ``--repeat`` runs. Throughput and CPU time are measured
from the ``--warmup``-th sample to the end, thousands of samples (start-up, worker spawn and the
first batch's latency are reported apart). **The limit** row runs the same per-sample functions and
collation in a plain loop over the rows in memory, in one process: the machine's cores divided by
its CPU time per sample is what no loader can beat here, and every row gives its ratio to it. CPU
milliseconds per sample are given for the training process and for its worker processes.

    python benchmarks/bench_vlm.py [--samples 2200] [--repeat 3] [--systems limit,zephon-threads,grain] [--quick]

Reference venv: ``python -m venv /tmp/refvenv && /tmp/refvenv/bin/pip install 'zephon[parquet]==0.2.0'
pillow tokenizers -c .ci/constraints.txt``.

The Mosaic and Energon venvs (the workers import this file, zephon-vision and zephon-tokenize from
source, so each needs their dependencies too; ``torch==2.13.0`` pinned so that pip does not swap it)::

    echo torch==2.13.0 > /tmp/torch-pin.txt
    python -m venv /tmp/bench-mosaic && /tmp/bench-mosaic/bin/pip install -c .ci/constraints.txt \
        -c /tmp/torch-pin.txt torch==2.13.0 mosaicml-streaming pillow tokenizers pyarrow psutil numpy \
        simplejpeg pluggy fsspec
    python -m venv /tmp/bench-energon && /tmp/bench-energon/bin/pip install -c .ci/constraints.txt \
        -c /tmp/torch-pin.txt torch==2.13.0 megatron-energon boto3==1.35.0 botocore==1.35.0 \
        aiobotocore==2.14.0 s3fs==2026.1.0 pillow tokenizers pyarrow psutil numpy simplejpeg pluggy fsspec

(without the boto3 / botocore / aiobotocore pins pip backtracks through s3fs's botocore ranges for
a very long time).
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
HELPERS = [
    str(ROOT),
    str(ROOT / "plugins" / "zephon-vision" / "src"),
    str(ROOT / "plugins" / "zephon-tokenize" / "src"),
]
SYSTEMS = (
    "limit",
    "zephon-threads",
    "zephon-processes",
    "zephon-fused",
    "grain",
    "torch",
    "litdata",
    "mosaic",
    "energon",
    "zephon-0.2.0-threads",
    "zephon-0.2.0-processes",
)
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
        out: dict[str, Any] = self.decode({"jpg": row["jpg"], "id": row["id"]})
        return out

    def augment(self, p: dict[str, Any], rng: np.random.Generator) -> dict[str, Any]:
        out: dict[str, Any] = self.flip(self.crop(p, rng), rng)
        return out

    def finish(self, p: dict[str, Any], caption: str) -> dict[str, Any]:
        p = self.patchify(p)
        grid = p["image_grid_thw"]
        ids = np.asarray([*self.tok.encode(caption).ids, EOS], dtype=np.int32)
        run = np.full(int(np.prod(grid)) // 4, IMAGE_PAD, dtype=np.int32)
        return {
            "input_ids": np.concatenate([run, ids]),
            "pixel_values": p["pixel_values"],
            "image_grid_thw": grid[None],
        }

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


WARMUP = int(os.environ.get("BENCH_VLM_WARMUP", "200"))
"""Samples before the steady window (set by the driver's ``--warmup``)."""


def _cpu_seconds() -> tuple[float, float]:
    """(CPU seconds of this process, of its live worker processes), user + system, so far."""
    import psutil  # type: ignore[import-untyped]

    me = psutil.Process()
    own = sum(me.cpu_times()[:2])
    workers = 0.0
    for child in me.children(recursive=True):
        try:
            workers += sum(child.cpu_times()[:2])
        except psutil.Error:  # a worker that just ended: its time is lost to this window
            pass
    return own, workers


def _measure(batches: Any, count: Any, total: int, t_start: float) -> dict[str, float]:
    """Iterate ``batches`` until ``total`` samples; ``count(b)`` -> (samples, usable tokens, slots).

    Rates and CPU time are measured from the batch that brings the count to :data:`WARMUP` to the
    end: by then every loader is past its start-up, and the window (thousands of samples) is long
    enough that what a loader buffered before it cannot make it look faster than it produces.
    ``first_batch_s`` is the time from the start of the run to the first batch. CPU seconds per
    sample are the training process's (every thread of it) and its worker processes', over the
    same window.
    """
    first = None
    first_batch = None
    seen = tokens = slots = 0
    seen0 = tokens0 = slots0 = 0
    cpu0 = (0.0, 0.0)
    # Hold the iterator until the CPU times are read: a torch DataLoader iterator dropped at the
    # ``break`` shuts its workers down at once, and their CPU time would be lost to the window.
    it = iter(batches)
    for b in it:
        s, t, sl = count(b)
        if first_batch is None:
            first_batch = time.perf_counter()
        seen, tokens, slots = seen + s, tokens + t, slots + sl
        if first is None and seen >= min(WARMUP, total // 2):
            first = time.perf_counter()
            cpu0 = _cpu_seconds()
            seen0, tokens0, slots0 = seen, tokens, slots
        if seen >= total:
            break
    end = time.perf_counter()
    cpu1 = _cpu_seconds()
    del it
    assert first is not None and first_batch is not None
    dt = end - first
    n = max(1, seen - seen0)
    return {
        "samples_per_s": (seen - seen0) / dt,
        "tokens_per_s": (tokens - tokens0) / dt,
        "padding": 1 - (tokens - tokens0) / max(1, slots - slots0),
        "first_batch_s": first_batch - t_start,
        "samples": seen,
        "seconds": dt,
        "cpu_main_ms": 1000 * (cpu1[0] - cpu0[0]) / n,
        "cpu_workers_ms": 1000 * max(0.0, cpu1[1] - cpu0[1]) / n,
    }


def run_limit(workload: str, corpus: str, total: int) -> dict[str, float]:
    """The limit: the same per-sample functions and collation in a plain loop over rows in memory.

    One process, no loader: what one core does per sample. Its samples/s over the same window,
    times the machine's cores, is what no loader can beat here (``limit_per_s``).
    """
    t0 = time.perf_counter()
    src = ParquetRows(str(Path(corpus) / "parquet"), total)
    rows = [src[i] for i in range(len(src))]
    fn, collate, count = (
        (do_decode, list_collate, _count_decode) if workload == "decode" else (do_full, pad_collate, _count_padded)
    )

    def batches() -> Any:
        for i in range(0, len(rows), DECODE_BATCH):
            yield collate([fn(r) for r in rows[i : i + DECODE_BATCH]])

    out = _measure(batches(), count, total, t0)
    out["limit_per_s"] = (os.cpu_count() or 1) * 1000 / max(1e-9, out["cpu_main_ms"])
    return out


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
                .map_transform(do_full_rng, parallelism=2, seed=SEED)  # type: ignore[arg-type]  # seeded: fn(row, rng)
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
    import grain  # type: ignore[import-not-found]

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
    fn, collate, count = (
        (do_decode, list_collate, _count_decode) if workload == "decode" else (do_full, pad_collate, _count_padded)
    )
    dl: Any = DataLoader(TorchMap(src, fn), batch_size=DECODE_BATCH, num_workers=2, collate_fn=collate)  # type: ignore[arg-type]
    return _measure(dl, count, total, t0)


def run_litdata(workload: str, corpus: str, total: int) -> dict[str, float]:
    import litdata  # type: ignore[import-untyped]

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


def _streaming_base() -> Any:
    from peer_imports import streaming_base

    return streaming_base()


def prepare_mosaic(corpus: str) -> None:
    """Write (once) the MDS copy of the Parquet corpus in ``<corpus>/mds``: columns jpg, txt, id.

    Shards of about the Parquet shards' size, uncompressed (the JPEGs are compressed already, and
    the other copies are uncompressed too). Runs in the Mosaic venv, before any measured run.
    """
    import shutil

    import pyarrow.parquet as pq

    out = Path(corpus) / "mds"
    if (out / "_done").exists():
        return
    if out.exists():
        shutil.rmtree(out)
    files = sorted(Path(corpus, "parquet").glob("*.parquet"))
    size_limit = max(1 << 20, int(1.1 * max(f.stat().st_size for f in files)))
    sb: Any = _streaming_base()
    with sb.MDSWriter(out=str(out), columns={"jpg": "bytes", "txt": "str", "id": "int"}, size_limit=size_limit) as w:
        for f in files:
            for row in pq.read_table(f).to_pylist():
                w.write({"jpg": row["jpg"], "txt": row["txt"], "id": int(row["id"])})
    (out / "_done").write_text("mds\n")


def run_mosaic(workload: str, corpus: str, total: int) -> dict[str, float]:
    """Mosaic Streaming: ``StreamingDataset`` over the local MDS copy, a plain torch ``DataLoader``."""
    from torch.utils.data import DataLoader

    t0 = time.perf_counter()
    sb: Any = _streaming_base()
    fn = do_decode if workload == "decode" else do_full

    class Mapped(sb.StreamingDataset):  # type: ignore[misc]
        def __getitem__(self, index: Any) -> Any:
            return fn(super().__getitem__(index))

    # local only (no remote): Streaming reads the shards where they are, nothing is copied.
    ds = Mapped(local=str(Path(corpus) / "mds"), shuffle=False, batch_size=DECODE_BATCH)
    collate, count = (list_collate, _count_decode) if workload == "decode" else (pad_collate, _count_padded)
    dl: Any = DataLoader(ds, batch_size=DECODE_BATCH, num_workers=2, collate_fn=collate)
    return _measure(dl, count, total, t0)


def prepare_energon(corpus: str) -> None:
    """Add (once) Energon's metadata (``.nv-meta``) to the WebDataset copy, with ``energon prepare``.

    Non-interactive: every tar in the train split, in storage order (no ``--shuffle-tars``), as a
    ``CrudeWebdataset``: samples stay raw dicts, cooked by the benchmark's task encoder.
    """
    folder = Path(corpus) / "webdataset"
    if (folder / ".nv-meta" / "dataset.yaml").exists():
        return
    cli = Path(sys.executable).with_name("energon")
    cmd = [str(cli), "prepare", str(folder), "--non-interactive", "--split-ratio", "1,0,0"]
    cmd += ["--sample-type", "CrudeWebdataset", "--num-workers", "2", "--no-progress", "--force-overwrite"]
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=600)


def _energon_row(crude: dict[str, Any]) -> dict[str, Any]:
    """Energon's cooker: the crude WebDataset sample (undecoded members) -> the benchmark's row."""
    return {"jpg": crude["jpg"], "txt": crude["txt"].decode("utf-8"), "id": int(crude["id"])}


def run_energon(workload: str, corpus: str, total: int) -> dict[str, float]:
    """Megatron-Energon: ``get_train_dataset`` with a task encoder running the same functions.

    The task encoder has no decoder (the members stay bytes, decoded by zephon-vision's function
    like everywhere else), one cooker for the crude samples, ``encode_sample`` = the per-sample
    work and ``batch`` = the collate; no shuffle buffer, no slice shuffling (each worker reads its
    shards in storage order), 2 workers.
    """
    import importlib

    energon: Any = importlib.import_module("megatron.energon")
    fn, collate, count = (
        (do_decode, list_collate, _count_decode) if workload == "decode" else (do_full, pad_collate, _count_padded)
    )

    class Encoder(energon.TaskEncoder):  # type: ignore[misc]
        decoder = None
        cookers = (energon.Cooker(energon.stateless(_energon_row)),)

        @energon.stateless  # type: ignore[untyped-decorator]
        def encode_sample(self, sample: Any) -> Any:
            return fn(sample)

        @energon.stateless  # type: ignore[untyped-decorator]
        def batch(self, samples: list[Any]) -> Any:
            return collate(samples)

        @energon.stateless  # type: ignore[untyped-decorator]
        def encode_batch(self, batch: Any) -> Any:
            return batch

    t0 = time.perf_counter()
    ds = energon.get_train_dataset(
        str(Path(corpus) / "webdataset"),
        batch_size=DECODE_BATCH,
        shuffle_buffer_size=None,
        max_samples_per_sequence=None,
        shuffle_over_epochs_multiplier=None,  # each worker's shard slices in storage order,
        parallel_shard_iters=1,  # one open shard at a time per worker (the training default interleaves 16)
        worker_config=energon.WorkerConfig(rank=0, world_size=1, num_workers=2),
        task_encoder=Encoder(),
    )
    return _measure(energon.get_loader(ds), count, total, t0)


def run_reference(runner: str, workload: str, corpus: str, total: int) -> dict[str, float]:
    """zephon==0.2.0 (import name ``zephon``), in its own venv."""
    from zephon import Pipeline  # type: ignore[import-not-found]  # the reference implementation
    from zephon.io import Dataset  # type: ignore[import-not-found]
    from zephon.work import MixtureSpec, StaticMixtureWorkSource  # type: ignore[import-not-found]

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
    runs = {
        "grain": run_grain,
        "torch": run_torch,
        "litdata": run_litdata,
        "mosaic": run_mosaic,
        "energon": run_energon,
        "limit": run_limit,
    }
    return runs[system](workload, corpus, total)


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


VENV_SYSTEMS = {
    "mosaic": ("mosaicml-streaming", "streaming"),
    "energon": ("megatron-energon", "megatron.energon"),
}
"""Systems that run in a venv of their own: (distribution, import name)."""
VENV_IMPORTS = "import importlib.util, numpy, PIL, tokenizers, pyarrow, psutil, torch, pluggy, fsspec"
"""What bench_vlm's per-sample functions (zephon-vision, zephon-tokenize, from source) need in such a venv."""


def _python(system: str, args: Any) -> str:
    """The interpreter a system runs in: its own venv's, or this one."""
    if system.startswith("zephon-0.2.0"):
        return str(args.ref_python)
    if system in VENV_SYSTEMS:
        return str(getattr(args, f"{system}_python"))
    return sys.executable


def _prepare(python: str, system: str, corpus: str, timeout: float) -> str | None:
    """Write (once, cached in the corpus folder) the copy ``system`` reads, in its venv; None or why not."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([*HELPERS, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    try:
        out = subprocess.run(
            [python, __file__, "--prepare", system, corpus], capture_output=True, text=True, timeout=timeout, env=env
        )
    except subprocess.TimeoutExpired:
        return f"preparing its copy timed out after {timeout:.0f} s"
    if out.returncode != 0:
        tail = (out.stderr or out.stdout).strip().splitlines()[-2:]
        return "preparing its copy failed: " + " | ".join(tail)[-300:]
    return None


def _available(system: str, ref_python: str, python: str | None = None) -> str | None:
    """None when ``system`` can run, else why not (``python``: the venv of a :data:`VENV_SYSTEMS` system)."""
    import importlib.util

    if system in VENV_SYSTEMS:
        dist, name = VENV_SYSTEMS[system]
        if python is None or not Path(python).exists():
            return f"no {dist} venv at {python} (see the module docstring)"
        code = f"{VENV_IMPORTS}; assert importlib.util.find_spec({name!r}) is not None"
        check = subprocess.run([python, "-c", code], capture_output=True)
        return (
            None
            if check.returncode == 0
            else f"{dist} (with torch, pyarrow, pillow, tokenizers, psutil) not importable"
        )
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
    if len(sys.argv) > 1 and sys.argv[1] == "--prepare":
        {"mosaic": prepare_mosaic, "energon": prepare_energon}[sys.argv[2]](sys.argv[3])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--images", type=int, default=3000, help="photographs in the corpus (default 3000)")
    ap.add_argument("--samples", type=int, default=2200, help="samples per run, warm-up included (default 2200)")
    ap.add_argument("--warmup", type=int, default=200, help="samples before the steady window (default 200)")
    ap.add_argument("--repeat", type=int, default=3, help="interleaved repeats; the table shows medians (default 3)")
    ap.add_argument("--quick", action="store_true", help="a smoke run: 600 images, 500 samples, one round")
    ap.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated subset of " + ", ".join(SYSTEMS))
    ap.add_argument("--workloads", default=",".join(WORKLOADS), help="decode, full or both")
    ap.add_argument("--ref-python", default="/tmp/refvenv/bin/python", help="python of the zephon==0.2.0 venv")
    ap.add_argument(
        "--mosaic-python", default="/tmp/bench-mosaic/bin/python", help="python of the mosaicml-streaming venv"
    )
    ap.add_argument(
        "--energon-python", default="/tmp/bench-energon/bin/python", help="python of the megatron-energon venv"
    )
    ap.add_argument("--root", help="corpus cache folder (default $ZEPHON_DEMO_DIR or <tmp>/zephon-vlm-demo)")
    ap.add_argument("--timeout", type=float, default=300, help="per-run limit in seconds")
    args = ap.parse_args()
    if args.quick:
        args.images, args.samples, args.warmup, args.repeat = 600, 500, 100, 1
    if args.samples + 64 > args.images:  # a loader that ran out would stop its workers before the window ends
        ap.error(
            f"--samples {args.samples} leaves less than 64 of the corpus (--images {args.images}) unread: loaders must not run out"
        )
    os.environ["BENCH_VLM_WARMUP"] = str(args.warmup)

    from zephon_vlm_demo import corpus as corpus_mod

    c = corpus_mod.write(Path(args.root) if args.root else None, n=args.images, shard_size=max(10, args.images // 8))
    print(f"corpus: {c.describe()} (ready in {c.seconds:.1f} s) at {c.root}")
    systems = [s for s in args.systems.split(",") if s]
    workloads = [w for w in args.workloads.split(",") if w]
    unknown = sorted(set(systems) - set(SYSTEMS)) + sorted(set(workloads) - set(WORKLOADS))
    if unknown:
        ap.error(f"unknown system or workload {unknown}: systems are {', '.join(SYSTEMS)}; workloads decode, full")
    skipped = {s: why for s in systems if (why := _available(s, args.ref_python, _python(s, args)))}
    if "litdata" in c.skipped and "litdata" in systems:
        skipped["litdata"] = c.skipped["litdata"]
    for s in systems:
        if s in VENV_SYSTEMS and s not in skipped and (why := _prepare(_python(s, args), s, str(c.root), 1200)):
            skipped[s] = why
    for s, why in skipped.items():
        print(f"  {s}: skipped ({why})")
    runs = [s for s in systems if s not in skipped]
    print(f"cpu cores: {os.cpu_count()}, load average: {os.getloadavg()[0]:.1f} (start)")
    results: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in range(args.repeat):
        for workload in workloads:
            for system in runs:
                python = _python(system, args)
                t = time.perf_counter()
                res = _spawn(python, system, workload, str(c.root), args.samples, args.timeout)
                res["wall_s"] = time.perf_counter() - t  # the whole run: interpreter, imports, workers
                results.setdefault((system, workload), []).append(res)
                what = res.get("error") or f"{res['samples_per_s']:,.0f} samples/s"
                print(
                    f"  [{r + 1}/{args.repeat}] {workload:6s} {system:24s} {what}  ({time.perf_counter() - t:.0f} s)",
                    flush=True,
                )
    print(f"load average: {os.getloadavg()[0]:.1f} (end)")
    print()
    print(table(results, runs, workloads, args))


def _median(runs: list[dict[str, Any]], key: str) -> float | None:
    vals = [r[key] for r in runs if "error" not in r]
    return statistics.median(vals) if vals else None


def table(
    results: dict[tuple[str, str], list[dict[str, Any]]], systems: list[str], workloads: list[str], args: Any
) -> str:
    """Per system: each workload's samples/s, its ratio to the limit and CPU ms per sample (main + workers)."""
    names = {"decode": f"decode + batch({DECODE_BATCH})", "full": "full pipeline"}
    head = ["system"]
    for w in workloads:
        head += [f"{names[w]} samples/s", "x limit", "CPU ms/sample (main + workers)"]
    if "full" in workloads:
        head += ["full: usable tokens/s", "full: padding", "full: first batch s"]
    rows = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]

    def fmt(v: float | None, spec: str) -> str:
        return "—" if v is None else format(v, spec)

    limit = {w: _median(results.get(("limit", w), []), "limit_per_s") for w in workloads}
    for s in systems:
        cells = []
        for w in workloads:
            runs = results.get((s, w), [])
            rate = limit[w] if s == "limit" else _median(runs, "samples_per_s")
            main, workers = _median(runs, "cpu_main_ms"), _median(runs, "cpu_workers_ms")
            lim = limit[w]
            cells += [
                fmt(rate, ",.0f"),
                "—" if rate is None or not lim else f"{rate / lim:.2f}",
                "—" if main is None or workers is None else f"{main:.2f} + {workers:.2f}",
            ]
        if "full" in workloads:
            full = results.get((s, "full"), [])
            pad = _median(full, "padding")
            cells += [
                fmt(_median(full, "tokens_per_s"), ",.0f"),
                "—" if pad is None else f"{100 * pad:.1f}%",
                fmt(_median(full, "first_batch_s"), ".1f"),
            ]
        errors = [r["error"] for w in workloads for r in results.get((s, w), []) if "error" in r]
        name = "**the limit**" if s == "limit" else s
        name += f" (error: {errors[0][:80]})" if errors else ""
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    rows.append("")
    rows.append(
        f"medians of {args.repeat} interleaved runs of {args.samples} samples each, steady window from "
        f"the {args.warmup}th sample to the end; the limit is {os.cpu_count()} cores over the CPU time "
        "per sample of the same functions in a plain loop over the rows in memory"
    )
    return "\n".join(rows)


if __name__ == "__main__":
    main()
