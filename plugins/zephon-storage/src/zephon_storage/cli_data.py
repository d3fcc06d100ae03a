"""``zephon show`` and ``zephon inspect``: look at a dataset before training on it.

Both open the dataset exactly as :meth:`Dataset.from_path` does (the installed reader plugins detect
the format), so what they print is what a pipeline would read. The kernel stays format-agnostic:
samples are plain dicts, and values are described by their Python/numpy type, never by a format
library's own types.

Looking must not change what is looked at: the dataset is opened inside
:func:`~zephon_storage.sidecar.data_read_only`, so a format that needs an index to read at
random (JSON Lines, WebDataset) uses one already beside the data but builds a missing one in the
cache directory, never in the data folder (``zephon index`` is the command that writes there).
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from zephon_core import Dataset, ReaderError, ZephonError
from zephon_storage.location import StorageBacked

if TYPE_CHECKING:
    from zephon_core.plugin_api import ZephonPluginManager

STRING_WIDTH = 80
"""Characters of a string shown before it is cut (its full length is printed after)."""

ITEMS_SHOWN = 5
"""Elements of a list or array shown before ``…``."""


def open_dataset(path: str, fmt: str | None, plugins: ZephonPluginManager) -> Dataset:
    """The dataset at ``path``, opened read-only; any failure becomes a :class:`ZephonError` (one line, exit status 2).

    A format library may raise its own exception for a damaged file; the command line must still
    print one clear line instead of a traceback.
    """
    from zephon_storage.sidecar import data_read_only

    name = os.path.basename(os.path.normpath(path)) or "dataset"
    try:
        with data_read_only():
            return Dataset.from_path(name, path, fmt, plugins=plugins)
    except ZephonError:
        raise
    except Exception as exc:
        raise ReaderError(f"cannot open {path!r}: {type(exc).__name__}: {exc}") from exc


# -- describing values ------------------------------------------------------------------------------
def _cut(text: str, width: int = STRING_WIDTH) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _shape(shape: tuple[int, ...]) -> str:
    return "x".join(str(d) for d in shape) if shape else "scalar"


def _item(v: Any) -> str:
    """An array element: floats to 6 significant digits (a float32's noise digits say nothing)."""
    return f"{v:.6g}" if isinstance(v, float) else _cut(repr(v), 20)


def summarize(value: Any) -> str:
    """One short line for a field value: long strings cut, arrays as dtype/shape and first values, bytes as length."""
    if isinstance(value, str):
        shown = repr(_cut(value))
        return shown if len(value) <= STRING_WIDTH else f"{shown} ({len(value)} chars)"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return f"<{len(bytes(value))} bytes>"
    if isinstance(value, np.ndarray):
        flat = value.ravel()[:ITEMS_SHOWN].tolist()
        more = ", …" if value.size > ITEMS_SHOWN else ""
        return f"array {value.dtype}[{_shape(value.shape)}] [{', '.join(_item(v) for v in flat)}{more}]"
    if isinstance(value, np.generic):
        return f"{value.dtype} {_item(value.item())}"
    if isinstance(value, (list, tuple)):
        head = ", ".join(summarize(v) for v in value[:ITEMS_SHOWN])
        more = f", … ({len(value)} items)" if len(value) > ITEMS_SHOWN else ""
        open_, close = ("[", "]") if isinstance(value, list) else ("(", ")")
        return _cut(f"{open_}{head}{more}{close}", 2 * STRING_WIDTH)
    if isinstance(value, dict):
        inner = ", ".join(f"{k}: {summarize(v)}" for k, v in list(value.items())[:ITEMS_SHOWN])
        more = f", … ({len(value)} keys)" if len(value) > ITEMS_SHOWN else ""
        return _cut(f"{{{inner}{more}}}", 2 * STRING_WIDTH)
    return _cut(repr(value))


def type_of(value: Any) -> str:
    """The schema word for a value: ``str``, ``int64[3x4]`` for arrays, ``list[float]``, ``dict``…"""
    if isinstance(value, np.ndarray):
        return f"{value.dtype}[{_shape(value.shape)}]"
    if isinstance(value, np.generic):
        return str(value.dtype)
    if isinstance(value, (list, tuple)):
        inner = sorted({type_of(v) for v in value[:ITEMS_SHOWN]})
        return f"{type(value).__name__}[{' | '.join(inner) if inner else ''}]"
    if value is None:
        return "None"
    return type(value).__name__


def schema(samples: Iterable[dict[str, Any]]) -> dict[str, str]:
    """Field -> the types seen across ``samples`` (in first-seen field order).

    Arrays of one dtype whose shapes differ are merged with ``?`` in the varying dimensions
    (``int32[?]`` for token arrays of varying length), so the schema stays one line per field.
    """
    seen: dict[str, list[Any]] = {}
    for s in samples:
        for k, v in s.items():
            seen.setdefault(k, []).append(v)
    out: dict[str, str] = {}
    for k, values in seen.items():
        words: list[str] = []
        arrays: dict[tuple[str, int], list[tuple[int, ...]]] = {}
        for v in values:
            if isinstance(v, np.ndarray):
                arrays.setdefault((str(v.dtype), v.ndim), []).append(v.shape)
            elif (w := type_of(v)) not in words:
                words.append(w)
        for (dtype, ndim), shapes in arrays.items():
            dims = ["?" if len({s[d] for s in shapes}) > 1 else str(shapes[0][d]) for d in range(ndim)]
            words.append(f"{dtype}[{'x'.join(dims) if dims else 'scalar'}]")
        out[k] = " | ".join(words)
    return out


# -- the commands -----------------------------------------------------------------------------------
def show(args: argparse.Namespace, plugins: ZephonPluginManager) -> int:
    """Print the first ``-n`` samples, one field per line, then the schema they show."""
    ds = open_dataset(args.path, args.format, plugins)
    try:
        n = min(max(0, args.n), ds.num_samples)
        try:
            samples = ds.head(n)
        except ZephonError:
            raise
        except Exception as exc:
            raise ReaderError(f"{args.path}: cannot read samples: {type(exc).__name__}: {exc}") from exc
        print(f"{args.path}: format {ds.format}, {len(ds.shards)} shard(s), {ds.num_samples} sample(s)")
        for i, sample in enumerate(samples):
            shard, local = ds.locate(i)
            print(f"\nsample {i} (shard {ds.shards[shard].id}, record {local})")
            width = max((len(str(k)) for k in sample), default=0)
            for key, value in sample.items():
                print(f"  {str(key).ljust(width)}  {summarize(value)}")
        fields = schema(samples)
        print(f"\nschema (from {len(samples)} sample(s)):")
        width = max((len(str(k)) for k in fields), default=0)
        for key, words in fields.items():
            print(f"  {str(key).ljust(width)}  {words}")
    finally:
        ds.reader.close()
    return 0


def _file_size(ds: Dataset, shard_id: str) -> int | None:
    """The size of the file behind a shard, when the reader has a storage root that knows it.

    Most readers name a shard by its path relative to the dataset root; one that does not (or keeps
    no storage at all, like the in-memory reader) simply has no size to show.
    """
    if not isinstance(ds.reader, StorageBacked):
        return None
    try:
        return int(ds.reader.storage.info(shard_id).size)
    except Exception:
        return None


def inspect_dataset(args: argparse.Namespace, plugins: ZephonPluginManager) -> int:
    """Print the detected format, then one row per shard (id, samples, bytes) and the totals."""
    ds = open_dataset(args.path, args.format, plugins)
    try:
        reg = plugins.registry.get("reader", ds.format)
        rows = [(s.id, s.num_samples, _file_size(ds, s.id)) for s in ds.shards]
    finally:
        ds.reader.close()
    sizes = [b for _, _, b in rows if b is not None]
    total_bytes = sum(sizes) if len(sizes) == len(rows) else None
    if args.json:
        doc = {
            "path": args.path,
            "format": ds.format,
            "package": reg.package,
            "version": reg.version,
            "shards": [{"id": i, "samples": n, "bytes": b} for i, n, b in rows],
            "samples": ds.num_samples,
            "bytes": total_bytes,
        }
        print(json.dumps(doc, indent=1))
        return 0
    print(f"path:    {args.path}")
    print(f"format:  {ds.format} ({reg.package} {reg.version})")
    print(f"shards:  {len(rows)}")
    table = [("SHARD", "ID", "SAMPLES", "BYTES")]
    table += [(str(k), i, str(n), "-" if b is None else str(b)) for k, (i, n, b) in enumerate(rows)]
    table.append(("total", "", str(ds.num_samples), "-" if total_bytes is None else str(total_bytes)))
    widths = [max(len(r[c]) for r in table) for c in range(4)]
    for r in table:
        cells = [r[0].ljust(widths[0]), r[1].ljust(widths[1]), r[2].rjust(widths[2]), r[3].rjust(widths[3])]
        print("  ".join(cells).rstrip())
    return 0
