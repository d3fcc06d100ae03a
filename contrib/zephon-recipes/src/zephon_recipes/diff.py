"""What differs between two recipes, and whether each difference changes the data.

An ablation compares two runs; what matters first is whether the global batches differ at all.
The kernel's promise is that runners, parallelism, queueing and prefetching never change the
batches (the checkpoint fingerprint leaves them out for that reason), so those differences are
*performance-only*; everything else (datasets, weights, seeds, operator arguments, lanes, batch
size) changes the data. A schedule's breakpoints change the data only from the first breakpoint
that differs, which the report names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from zephon_recipes.document import Document, Key, dotted

STEP_PERFORMANCE = frozenset({"parallelism", "runner", "timeout_s"})
"""Arguments of any step (fetch, an operator, batch) that never change the data."""

OPTION_PERFORMANCE = frozenset(
    {
        "runner",
        "queue_depth",
        "timeout_s",
        "max_inflight_bytes",
        "trace",
        "autotune",
        "cpu_budget",
        "metrics_callback",
        "metrics_every_s",
        "manifest",
        "manifest_every_steps",
        "fuse",
        "validate",
        "dp_rank",
        "dp_world_size",
    }
)
"""Run options that never change the data (``lanes``, ``flush_every_k_chunks``, ``lane_assignment``
and ``lane_seed`` do)."""

READER_PERFORMANCE = frozenset(
    {
        "prefetch",
        "open_files",
        "row_group_cache_bytes",
        "cache_bytes_decoded",
        "max_open_shards",
        "max_open_chunks",
        "verify",
        "verify_checksums",
        "verify_hashes",
        "manifest",
        "index_dir",
        "rebuild_stale",
        "download",
        "gap",
        "storage_options",
    }
)
"""Reader options that change how files are read, not what is read."""

METADATA = frozenset({"description", "world_sizes"})


@dataclass(frozen=True)
class Difference:
    """One differing key: its values in A and B, where each was written, and its effect."""

    key: Key
    a: Any
    b: Any
    where_a: str
    where_b: str
    changes_data: bool
    note: str = ""

    def __str__(self) -> str:
        def show(v: Any) -> str:
            return "(not set)" if v is _MISSING else repr(v)

        note = f"  [{self.note}]" if self.note else ""
        return f"{dotted(self.key)}: {show(self.a)} -> {show(self.b)}  ({self.where_a} / {self.where_b}){note}"


_MISSING: Any = type("_Missing", (), {"__repr__": lambda self: "(not set)"})()


def _step_name(entry: Any) -> str | None:
    return str(next(iter(entry))) if isinstance(entry, dict) and len(entry) == 1 else None


def classify(key: Key) -> bool:
    """Whether a difference at ``key`` changes the data (False: performance-only or metadata)."""
    if not key:
        return True
    head = key[0]
    if head in METADATA or head == "fetch":
        return False
    if head == "options":
        return not (len(key) >= 2 and key[1] in OPTION_PERFORMANCE)
    if head == "batch":
        return not (len(key) == 2 and key[1] in STEP_PERFORMANCE)
    if head == "operators":
        return not (len(key) == 4 and key[3] in STEP_PERFORMANCE)
    if head == "datasets":
        return not (len(key) >= 4 and key[2] == "options" and key[3] in READER_PERFORMANCE)
    return True


def _walk(a: Any, b: Any, key: Key, out: list[Key]) -> None:
    if (isinstance(a, dict) and b is _MISSING) or (a is _MISSING and isinstance(b, dict)):
        a, b = (a if a is not _MISSING else {}), (b if b is not _MISSING else {})
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(a) + [k for k in b if k not in a]:
            _walk(a.get(k, _MISSING), b.get(k, _MISSING), (*key, k), out)
        return
    if key == ("operators",) and isinstance(a, list) and isinstance(b, list):
        if [_step_name(e) for e in a] == [_step_name(e) for e in b]:
            for i, (x, y) in enumerate(zip(a, b)):
                _walk(x, y, (*key, i), out)
            return
    if a != b or type(a) is not type(b):
        out.append(key)


def _get(data: Any, key: Key) -> Any:
    for part in key:
        if isinstance(data, dict) and part in data:
            data = data[part]
        elif isinstance(data, list) and isinstance(part, int) and part < len(data):
            data = data[part]
        else:
            return _MISSING
    return data


def _schedule_note(a: Any, b: Any) -> str:
    """From which schedule position a breakpoint list first differs."""
    pa = a if isinstance(a, list) else []
    pb = b if isinstance(b, list) else []
    for x, y in zip(pa, pb):
        if x != y:
            at = [p["at"] for p in (x, y) if isinstance(p, dict) and isinstance(p.get("at"), (int, float))]
            return f"data differs from schedule position {min(at) if at else 0}"
    if len(pa) != len(pb):
        longer = pa if len(pa) > len(pb) else pb
        extra = longer[min(len(pa), len(pb))]
        return f"data differs from schedule position {extra.get('at', 0) if isinstance(extra, dict) else 0}"
    return ""


def diff(a: Document, b: Document) -> list[Difference]:
    """Every differing key between two read recipes, classified, in A's key order."""
    keys: list[Key] = []
    _walk(a.data, b.data, (), keys)
    out = []
    for key in keys:
        va, vb = _get(a.data, key), _get(b.data, key)
        note = ""
        changes = classify(key)
        if key[:3] == ("mixture", "schedule", "breakpoints"):
            note = _schedule_note(va, vb)
        elif changes and key[:1] in (("mixture",), ("datasets",), ("operators",), ("batch",)):
            note = "data differs from global step 0"
        out.append(Difference(key, va, vb, str(a.loc(key)), str(b.loc(key)), changes, note))
    return out


def report(differences: list[Difference]) -> str:
    """The text ``zephon diff`` prints."""
    if not differences:
        return "the recipes are the same"
    data = [d for d in differences if d.changes_data]
    perf = [d for d in differences if not d.changes_data]
    lines = []
    if data:
        lines.append(f"{len(data)} difference(s) that change the data (the global batches differ):")
        lines += [f"  {d}" for d in data]
    if perf:
        lines.append(f"{len(perf)} performance-only difference(s) (the same global batches):")
        lines += [f"  {d}" for d in perf]
    if not data:
        lines.append("the two recipes produce the same global batches")
    return "\n".join(lines)
