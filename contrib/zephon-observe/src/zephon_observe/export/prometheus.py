"""A Prometheus endpoint for a running pipeline (``pip install 'zephon-observe[prometheus]'``).

``serve(pipeline, port)`` starts an HTTP server on ``127.0.0.1`` (by default: a training node's
metrics should not face the network unless asked) whose ``/metrics`` page is computed from
``pipeline.metrics()`` at every scrape, so nothing runs between scrapes. Cumulative figures are
Prometheus counters (``rate()`` makes them per second, over whatever window the dashboard wants);
fill levels, parallelism, latency percentiles and the windowed busy fractions are gauges. Every
series carries a ``stage`` label (the step's unique name) and the ``rank``.

To add the figures to a registry you already serve, register :func:`collector` ``(pipeline)`` in it.
The collector holds the pipeline weakly: serving metrics never keeps a finished pipeline alive.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from zephon_core import ConfigError

if TYPE_CHECKING:
    from zephon_core import Pipeline

COUNTERS = (
    ("records_in", "records_in", "Records that entered the step."),
    ("records_out", "records_out", "Records the step emitted."),
    ("bytes_in", "bytes_in", "Bytes queued into the step."),
    ("bytes_out", "bytes_out", "Bytes the step queued for the next one."),
    ("tasks", "tasks", "Worker tasks completed."),
    ("worker_busy_seconds", "busy_s", "Worker time spent in tasks (all workers together)."),
    ("accumulator_busy_seconds", "acc_busy_s", "Time the step's serial accumulator spent working."),
    ("input_wait_seconds", "wait_input_s", "Time the accumulator waited for input."),
    ("window_full_seconds", "window_full_s", "Time the accumulator waited for room in its reorder window."),
    ("output_blocked_seconds", "blocked_output_s", "Time the step waited for room in the next queue."),
)
"""(metric name, snapshot key, help) of the per-step counters."""

GAUGES = (
    ("parallelism", "parallelism", "Workers of the step now."),
    ("queue_fill", "queue_fill", "Fill of the step's input queue (0 to 1)."),
    ("window_fill", "window_fill", "Fill of the step's reorder window (0 to 1)."),
    ("in_flight", "in_flight", "Items in the step's reorder window."),
)

WINDOW_GAUGES = (
    ("worker_busy_ratio", "worker_busy", "Fraction of worker capacity in use over the window."),
    ("accumulator_busy_ratio", "accumulator_busy", "Fraction of time the accumulator worked over the window."),
    ("input_wait_ratio", "input_wait", "Fraction of time waiting for input over the window."),
    ("output_blocked_ratio", "output_blocked", "Fraction of time blocked on output over the window."),
)


def _client() -> Any:
    try:
        import prometheus_client
    except ImportError:
        raise ConfigError(
            "the Prometheus endpoint needs prometheus-client: install it with: pip install 'zephon-observe[prometheus]'"
        ) from None
    return prometheus_client


class PipelineCollector:
    """A Prometheus collector reading one pipeline's metrics at each scrape (see the module docstring)."""

    def __init__(self, pipeline: Pipeline, window_s: float = 10.0, namespace: str = "zephon") -> None:
        self._pipeline = weakref.ref(pipeline)
        self.window_s = window_s
        self.ns = namespace

    def describe(self) -> list[Any]:
        return []  # no scrape at registration: the pipeline may not be running yet

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        p = self._pipeline()
        if p is None:
            return
        m = p.metrics(self.window_s)
        rank = str(p.run_options.dp_rank)
        ns = self.ns
        stages = m.get("stages", [])
        windows = {w["name"]: w for w in (m.get("window") or {}).get("stages", [])}
        fam: CounterMetricFamily | GaugeMetricFamily
        for name, key, doc in COUNTERS:
            fam = CounterMetricFamily(f"{ns}_stage_{name}", doc, labels=["stage", "rank"])
            for s in stages:
                fam.add_metric([s["name"], rank], float(s[key]))
            yield fam
        for name, key, doc in GAUGES:
            fam = GaugeMetricFamily(f"{ns}_stage_{name}", doc, labels=["stage", "rank"])
            for s in stages:
                fam.add_metric([s["name"], rank], float(s[key]))
            yield fam
        for name, key, doc in WINDOW_GAUGES:
            fam = GaugeMetricFamily(f"{ns}_stage_{name}", f"{doc} ({self.window_s:g} s)", labels=["stage", "rank"])
            for s in stages:
                w = windows.get(s["name"])
                if w is not None:
                    fam.add_metric([s["name"], rank], float(w[key]))
            yield fam
        lat = GaugeMetricFamily(
            f"{ns}_stage_task_latency_seconds",
            "Worker task duration percentiles over the most recent tasks.",
            labels=["stage", "rank", "quantile"],
        )
        for s in stages:
            for q, v in (s.get("latency_ms") or {}).items():
                lat.add_metric([s["name"], rank, {"p50": "0.5", "p90": "0.9", "p99": "0.99"}.get(q, q)], v / 1000)
        yield lat
        consumer = m.get("consumer") or {}
        if "batches" in consumer:
            c = CounterMetricFamily(f"{ns}_consumer_batches", "Microbatches the training loop took.", labels=["rank"])
            c.add_metric([rank], float(consumer["batches"]))
            yield c
            w = CounterMetricFamily(
                f"{ns}_consumer_wait_seconds", "Time the training loop waited for a batch.", labels=["rank"]
            )
            w.add_metric([rank], float(consumer["wait_s"]))
            yield w
        chunks = CounterMetricFamily(f"{ns}_source_chunks", "Chunks the source fed into the pipeline.", labels=["rank"])
        chunks.add_metric([rank], float((m.get("source") or {}).get("chunks", 0)))
        yield chunks
        up = GaugeMetricFamily(f"{ns}_elapsed_seconds", "Seconds since the pipeline started.", labels=["rank"])
        up.add_metric([rank], float(m.get("elapsed_s", 0.0)))
        yield up


def collector(pipeline: Pipeline, window_s: float = 10.0, namespace: str = "zephon") -> PipelineCollector:
    """A collector to register in your own ``prometheus_client`` registry."""
    _client()
    return PipelineCollector(pipeline, window_s, namespace)


@dataclass
class PrometheusServer:
    """A running endpoint: ``url`` to scrape, ``close()`` to stop it."""

    server: Any
    thread: Any
    addr: str
    port: int

    @property
    def url(self) -> str:
        return f"http://{self.addr}:{self.port}/metrics"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(2.0)

    def __enter__(self) -> PrometheusServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve(
    pipeline: Pipeline, port: int = 9464, addr: str = "127.0.0.1", window_s: float = 10.0, namespace: str = "zephon"
) -> PrometheusServer:
    """Serve ``pipeline``'s metrics at ``http://addr:port/metrics`` (``port=0``: any free port).

    Call it before or after iteration starts; a scrape before the start returns no stage series.
    """
    client = _client()
    registry = client.CollectorRegistry(auto_describe=False)
    registry.register(PipelineCollector(pipeline, window_s, namespace))
    started = client.start_http_server(port, addr=addr, registry=registry)
    if not isinstance(started, tuple):  # prometheus-client < 0.17 returned nothing to stop
        raise ConfigError("zephon's Prometheus endpoint needs prometheus-client >= 0.17")
    server, thread = started
    return PrometheusServer(server, thread, addr, int(server.server_port))
