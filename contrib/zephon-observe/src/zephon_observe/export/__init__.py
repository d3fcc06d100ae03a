"""Metrics for trainers' dashboards: flat scalars for any logger, and a Prometheus endpoint.

A metrics snapshot (``Pipeline.metrics()``, or what ``options(metrics_callback=fn)`` and the
``zephon_metrics`` hook receive) is nested: per-step lists and a ``window`` of rates. Loggers such as
TensorBoard's ``add_scalar`` or ``wandb.log`` want flat ``name -> number`` pairs, so
:func:`flatten` turns a snapshot into ``zephon/<step>/<figure>`` scalars. The Prometheus endpoint
lives in :mod:`zephon_observe.export.prometheus` (``pip install 'zephon-observe[prometheus]'``); nothing
here imports a logging library.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

WINDOW_FIGURES = (
    "records_in_per_s",
    "records_out_per_s",
    "worker_busy",
    "accumulator_busy",
    "input_wait",
    "output_blocked",
    "window_full",
)
"""Per-step figures of a snapshot's window (rates per second and fractions of time)."""

GAUGES = ("parallelism", "queue_fill", "window_fill", "in_flight")
"""Per-step instantaneous figures of a snapshot."""


def flatten(snapshot: Mapping[str, Any], prefix: str = "zephon") -> dict[str, float]:
    """``{"zephon/<step>/<figure>": value, ...}`` from a metrics snapshot, for any scalar logger.

    Holds each step's windowed rates and fractions, its parallelism, queue and window fill, items in
    flight and worker latency percentiles (``latency_p50_ms`` ...), the training loop's batches per
    second and waiting fraction, and the source's chunks per second.
    """
    out: dict[str, float] = {}
    window = snapshot.get("window") or {}
    raw = {s["name"]: s for s in snapshot.get("stages", [])}
    for w in window.get("stages", []):
        name = w["name"]
        for key in WINDOW_FIGURES:
            if key in w:
                out[f"{prefix}/{name}/{key}"] = float(w[key])
        r = raw.get(name, {})
        for key in GAUGES:
            if key in r:
                out[f"{prefix}/{name}/{key}"] = float(r[key])
        for q, v in (r.get("latency_ms") or {}).items():
            out[f"{prefix}/{name}/latency_{q}_ms"] = float(v)
    consumer = window.get("consumer") or {}
    if consumer:
        out[f"{prefix}/consumer/batches_per_s"] = float(consumer["batches_per_s"])
        out[f"{prefix}/consumer/wait"] = float(consumer["wait"])
    source = window.get("source") or {}
    if source:
        out[f"{prefix}/source/chunks_per_s"] = float(source["chunks_per_s"])
    return out
