"""``zephon profile``: run a pipeline on this machine for a while and show where its time goes.

A pipeline is given as a Python file whose ``build_pipeline()`` returns a
:class:`~zephon_core.pipeline.Pipeline` (it may take ``plugins=``, the command's plugin manager),
or as a JSON (or, when PyYAML is installed, YAML) definition::

    {
      "source": {
        "datasets": [{"name": "web", "path": "data/web", "format": "jsonl", "options": {}}],
        "mixture": {"web": 0.75, "code": 0.25},
        "chunk_size": 256, "seed": 0
      },
      "fetch": {"parallelism": 2},
      "operators": [
        {"operator": "map_transform", "kwargs": {"fn": {"import": "mypkg.text:clean"}, "parallelism": 2}},
        {"operator": "shuffle", "args": [1024]}
      ],
      "batch": {"microbatch_size": 8},
      "options": {"lanes": 4, "runner": "threads"}
    }

``source`` keys other than ``datasets`` and ``mixture`` go to
:class:`~zephon_core.defaults.sources.static_mixture.StaticMixtureWorkSource`; a dataset ``path`` is relative to the
definition file; ``operators`` are registered operators by name with ``args``/``kwargs``; any value
``{"import": "module:attr"}`` is replaced by that Python object (functions, collate functions).

The run consumes batches as fast as it can (or at ``--consumer-ms`` per batch, to stand in for a
training step) while a metrics callback samples the pipeline every half second. The table covers the
run after the first batch (start-up excluded); the plot shows the samples over time.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import sys
import textwrap
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zephon_core import ConfigError, ZephonError
from zephon_core.plugin_api import Diagnosis, Progress, Ticker, diagnose, load_object, windowed

if TYPE_CHECKING:
    from zephon_core import Pipeline
    from zephon_core.plugin_api import ZephonPluginManager

SAMPLE_EVERY_S = 0.5
"""How often the profile samples the pipeline's metrics (the plot's resolution)."""


# -- loading a pipeline ---------------------------------------------------------------------------


def load_pipeline(path: str | os.PathLike[str], plugins: ZephonPluginManager) -> Pipeline:
    """The pipeline a ``.py`` file's ``build_pipeline()`` returns, or one built from a JSON/YAML definition."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{p}: no such file (give a Python file with build_pipeline(), or a JSON/YAML definition)")
    suffix = p.suffix.lower()
    if suffix == ".py":
        return _from_python(p, plugins)
    if suffix == ".json":
        try:
            definition = json.loads(p.read_text())
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{p}: not valid JSON: {exc}") from None
    elif suffix in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            raise ConfigError(
                f"{p}: reading YAML needs PyYAML (pip install pyyaml), or give the definition as JSON"
            ) from None
        try:
            definition = yaml.safe_load(p.read_text())
        except yaml.YAMLError as exc:
            raise ConfigError(f"{p}: not valid YAML: {exc}") from None
    else:
        raise ConfigError(f"{p}: expected a .py, .json, .yaml or .yml file")
    return from_definition(definition, plugins, base=p.parent)


def _from_python(path: Path, plugins: ZephonPluginManager) -> Pipeline:
    from zephon_core import Pipeline

    # Imported under its own name with its folder on sys.path, as when run as a script: it can import
    # its neighbours, and worker processes (which inherit sys.path) can import its functions by name.
    name = path.stem if path.stem.isidentifier() and path.stem not in sys.modules else f"zephon_profile_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"{path}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    folder = str(path.parent.resolve())
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec.loader.exec_module(module)
    build = getattr(module, "build_pipeline", None)
    if not callable(build):
        raise ConfigError(f"{path}: defines no build_pipeline() function")
    takes_plugins = "plugins" in inspect.signature(build).parameters
    pipeline = build(plugins=plugins) if takes_plugins else build()
    if not isinstance(pipeline, Pipeline):
        raise ConfigError(f"{path}: build_pipeline() returned {type(pipeline).__name__}, not a Pipeline")
    return pipeline


def _resolve(value: Any, where: str) -> Any:
    """``{"import": "module:attr"}`` → the object, recursively through lists and dicts."""
    if isinstance(value, dict):
        if set(value) == {"import"}:
            try:
                return load_object(value["import"])
            except Exception as exc:
                raise ConfigError(f"{where}: {exc}") from None
        return {k: _resolve(v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(v, f"{where}[{i}]") for i, v in enumerate(value)]
    return value


def _section(definition: dict[str, Any], key: str, kind: type, default: Any) -> Any:
    value = definition.get(key, default)
    if not isinstance(value, kind):
        raise ConfigError(f"definition: {key!r} must be a {kind.__name__}, got {type(value).__name__}")
    return value


def from_definition(definition: Any, plugins: ZephonPluginManager, base: Path | None = None) -> Pipeline:
    """Build a pipeline from the JSON-like definition described in the module docstring."""
    from zephon_core import Dataset, MixtureSpec, Pipeline, StaticMixtureWorkSource
    from zephon_core.plugin_api import not_normalised

    if not isinstance(definition, dict):
        raise ConfigError("definition: must be an object with 'source', 'operators', 'batch' and 'options'")
    unknown = set(definition) - {"source", "fetch", "operators", "batch", "options"}
    if unknown:
        raise ConfigError(
            f"definition: unknown keys {sorted(unknown)} (known: source, fetch, operators, batch, options)"
        )
    src = dict(_section(definition, "source", dict, {}))
    raw_datasets = src.pop("datasets", None)
    if not isinstance(raw_datasets, list) or not raw_datasets:
        raise ConfigError("definition: source.datasets must be a non-empty list of {name, path, format?, options?}")
    datasets = []
    for i, d in enumerate(raw_datasets):
        where = f"source.datasets[{i}]"
        if not isinstance(d, dict) or "path" not in d or "name" not in d:
            raise ConfigError(f"definition: {where} needs 'name' and 'path'")
        extra = set(d) - {"name", "path", "format", "options"}
        if extra:
            raise ConfigError(f"definition: {where}: unknown keys {sorted(extra)} (known: name, path, format, options)")
        path = str(d["path"])
        if base is not None and "://" not in path and not os.path.isabs(path):
            path = str(base / path)
        options = _resolve(d.get("options", {}), where + ".options")
        datasets.append(Dataset.from_path(d["name"], path, d.get("format"), plugins=plugins, **options))
    mixture = src.pop("mixture", None)
    if mixture is not None and not isinstance(mixture, dict):
        raise ConfigError(f"definition: source.mixture must be an object of weights per dataset, got {mixture!r}")
    spec = None
    if mixture is not None:
        # The definition's own warning (MixtureSpec's would point at this line and suggest ratios=True).
        spec = MixtureSpec(mixture, ratios=True)
        unnormalised = not_normalised(spec.weights)
        if unnormalised is not None:
            warnings.warn(f"definition: source.mixture: {unnormalised}; give shares that sum to 1", UserWarning, 2)
    try:
        source = StaticMixtureWorkSource(datasets, spec, **_resolve(src, "source"))
    except TypeError as exc:
        raise ConfigError(f"definition: source: {exc}") from None
    pipeline = Pipeline(source, plugins=plugins)
    fetch = _section(definition, "fetch", dict, {})
    if fetch:
        pipeline.fetch(**_resolve(fetch, "fetch"))
    for i, op in enumerate(_section(definition, "operators", list, [])):
        where = f"operators[{i}]"
        if not isinstance(op, dict) or not isinstance(op.get("operator"), str):
            raise ConfigError(f"definition: {where} needs 'operator': a registered operator's name")
        extra = set(op) - {"operator", "args", "kwargs"}
        if extra:
            raise ConfigError(f"definition: {where}: unknown keys {sorted(extra)} (known: operator, args, kwargs)")
        args = _resolve(op.get("args", []), where + ".args")
        kwargs = _resolve(op.get("kwargs", {}), where + ".kwargs")
        try:
            pipeline.apply(op["operator"], *args, **kwargs)
        except TypeError as exc:
            raise ConfigError(f"definition: {where} ({op['operator']}): {exc}") from None
    batch = _section(definition, "batch", dict, {})
    if "microbatch_size" not in batch:
        raise ConfigError("definition: batch.microbatch_size is required")
    pipeline.batch(**_resolve(batch, "batch"))
    opts = _section(definition, "options", dict, {})
    if opts:
        pipeline.options(**_resolve(opts, "options"))
    return pipeline


# -- running ----------------------------------------------------------------------------------------


@dataclass
class ProfileResult:
    """What a profile run measured: the table's window, the samples over time, the diagnosis."""

    seconds: float
    batches: int
    rows: int
    window: dict[str, Any]
    last: dict[str, Any]
    samples: list[dict[str, Any]] = field(default_factory=list)
    diagnosis: Diagnosis | None = None
    trace: dict[str, Any] | None = None
    finished: bool = False
    started_s: float = 0.0
    """When the first batch arrived (seconds since the pipeline started): the table starts there."""

    def stages(self) -> list[dict[str, Any]]:
        """One row per step: rates and fractions (the window) with parallelism, queue fill and latencies."""
        raw = {s["name"]: s for s in self.last.get("stages", [])}
        fills: dict[str, list[float]] = {}
        for sample in self.samples:
            if sample["t"] < self.started_s:
                continue
            for s in sample["stages"]:
                fills.setdefault(s["name"], []).append(s["queue_fill"])
        rows = []
        for w in self.window.get("stages", []):
            r = raw.get(w["name"], {})
            fill = fills.get(w["name"]) or [r.get("queue_fill", 0.0)]
            rows.append(
                {
                    **w,
                    "runner": r.get("runner", ""),
                    "parallelism": r.get("parallelism", 0),
                    "has_worker": r.get("has_worker", False),
                    "queue_fill": sum(fill) / len(fill),
                    "latency_ms": r.get("latency_ms", {"p50": 0.0, "p90": 0.0, "p99": 0.0}),
                }
            )
        return rows

    def to_json(self) -> dict[str, Any]:
        d = self.diagnosis
        return {
            "seconds": self.seconds,
            "batches": self.batches,
            "rows": self.rows,
            "finished": self.finished,
            "stages": self.stages(),
            "consumer": self.window.get("consumer", {}),
            "source": self.window.get("source", {}),
            "autotune": self.last.get("autotune"),
            "diagnosis": None
            if d is None
            else {
                "stage": d.stage,
                "reason": d.reason,
                "suggestion": d.suggestion,
                "text": str(d),
                "evidence": d.evidence,
            },
        }


def _compact(snapshot: dict[str, Any]) -> dict[str, Any]:
    """What the plot needs from one reporter snapshot (its window covers the interval since the last)."""
    raw = {s["name"]: s for s in snapshot["stages"]}
    return {
        "t": snapshot["elapsed_s"],
        "stages": [
            {
                "name": w["name"],
                "records_out_per_s": w["records_out_per_s"],
                "busy": max(w["worker_busy"], w["accumulator_busy"]),
                "queue_fill": raw[w["name"]]["queue_fill"],
            }
            for w in snapshot["window"]["stages"]
        ],
        "consumer_batches_per_s": snapshot["window"]["consumer"]["batches_per_s"],
    }


def run_profile(
    pipeline: Pipeline,
    *,
    seconds: float | None = None,
    batches: int | None = None,
    consumer_ms: float = 0.0,
    trace: bool = False,
    show_progress: bool = True,
) -> ProfileResult:
    """Iterate ``pipeline`` for ``seconds`` (or ``batches`` microbatches, or to its end) and measure it.

    The pipeline is closed at the end. A ``metrics_callback`` it already had keeps receiving
    snapshots, now every :data:`SAMPLE_EVERY_S` seconds.
    """
    if seconds is None and batches is None:
        seconds = 10.0
    samples: list[dict[str, Any]] = []
    user_cb: Callable[[dict[str, Any]], Any] | None = pipeline.run_options.metrics_callback

    def collect(snapshot: dict[str, Any]) -> None:
        samples.append(_compact(snapshot))
        if user_cb is not None:
            user_cb(snapshot)

    pipeline.options(
        metrics_callback=collect, metrics_every_s=SAMPLE_EVERY_S, trace=trace or pipeline.run_options.trace
    )
    n = rows = 0
    finished = False
    spans = None
    draw = None if show_progress else False
    # The bar starts with the first batch, when the measured part of the run starts: in seconds, or
    # in microbatches with --batches.
    with pipeline:
        with Ticker("starting the pipeline", draw=draw):
            it: Iterator[Any] = iter(pipeline)
            first = next(it, None)
        start = pipeline.metrics()
        t0 = time.monotonic()
        if first is None:
            finished = True
        else:
            n, rows = 1, len(first)
            total, unit = (round(seconds or 0), "s") if batches is None else (batches, "microbatches")
            with Progress(total, "profiling", unit, draw=draw, timer=batches is None) as bar:
                bar.update(0 if batches is None else 1)
                for b in it:
                    n += 1
                    rows += len(b)
                    if consumer_ms:
                        time.sleep(consumer_ms / 1000)
                    now = time.monotonic()
                    if batches is None:
                        bar.note(f"{n:,} microbatches")
                        bar.set(int(now - t0))
                    else:
                        bar.update(1)
                    if (batches is not None and n >= batches) or (seconds is not None and now - t0 >= seconds):
                        break
                else:
                    finished = True
        end = pipeline.metrics()
        elapsed = time.monotonic() - t0
        if trace:
            spans = pipeline.trace()
    window = windowed(end, start) if n > 1 else end.get("window", {})
    result = ProfileResult(
        elapsed, n, rows, window, end, samples, trace=spans, finished=finished, started_s=start.get("elapsed_s", 0.0)
    )
    if window.get("stages"):
        result.diagnosis = diagnose(window)
    return result


# -- showing ----------------------------------------------------------------------------------------


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _rate(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:,.1f}"


def format_table(result: ProfileResult) -> str:
    """The per-stage table and the diagnosis, as ``zephon profile`` prints them."""
    head = [
        "stage",
        "runner",
        "in rec/s",
        "out rec/s",
        "workers busy",
        "acc busy",
        "input wait",
        "out blocked",
        "queue fill",
        "p50 ms",
        "p90 ms",
        "p99 ms",
    ]
    body: list[list[str]] = []
    for s in result.stages():
        lat = s["latency_ms"]
        body.append(
            [
                s["name"],
                f"{s['runner']}x{s['parallelism']}" if s["has_worker"] else "-",
                _rate(s["records_in_per_s"]),
                _rate(s["records_out_per_s"]),
                _pct(s["worker_busy"]) if s["has_worker"] else "-",
                _pct(s["accumulator_busy"]),
                _pct(s["input_wait"]),
                _pct(s["output_blocked"]),
                _pct(s["queue_fill"]),
                *(f"{lat[k]:.2f}" if s["has_worker"] else "-" for k in ("p50", "p90", "p99")),
            ]
        )
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]

    def fmt(r: list[str]) -> str:
        return "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))

    c = result.window.get("consumer", {})
    lines = [
        f"profiled {result.batches} microbatches ({result.rows:,} rows) in {result.seconds:.1f} s after the first"
        + (" (the data ended)" if result.finished else ""),
        "",
        fmt(head),
        *(fmt(r) for r in body),
        "",
        f"source: {_rate(result.window.get('source', {}).get('chunks_per_s', 0.0))} chunks/s;  training loop: "
        f"{_rate(c.get('batches_per_s', 0.0))} microbatches/s ({_rate(result.rows / max(result.seconds, 1e-9))} rows/s), "
        f"waited for data {_pct(c.get('wait', 0.0))} of the time",
    ]
    tune = result.last.get("autotune")
    if tune:
        lines.append(f"autotune: parallelism {tune.get('parallelism')} within a budget of {tune.get('budget')} workers")
    if result.diagnosis is not None:
        lines.append(f"diagnosis: {result.diagnosis}")
    return "\n".join(lines)


def plot(result: ProfileResult, path: str | os.PathLike[str]) -> None:
    """Throughput, busy fraction and queue fill per stage over time, as a PNG (needs matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ConfigError("--plot needs matplotlib: install it with: pip install 'zephon-observe[plot]'") from None
    if not result.samples:
        raise ZephonError("--plot: the run was too short to sample (run for at least a second)")
    names = [s["name"] for s in result.samples[0]["stages"]]
    t = [s["t"] for s in result.samples]
    series = {
        key: {
            name: [next((x[key] for x in s["stages"] if x["name"] == name), 0.0) for s in result.samples]
            for name in names
        }
        for key in ("records_out_per_s", "busy", "queue_fill")
    }
    fig, axes = plt.subplots(3, 1, figsize=(10, 8.5), sharex=True, constrained_layout=True)
    colors = plt.get_cmap("tab10")
    titles = (
        ("records_out_per_s", "throughput (records out / s)"),
        ("busy", "busy fraction (workers, or the accumulator when busier)"),
        ("queue_fill", "input queue fill"),
    )
    for ax, (key, title) in zip(axes, titles):
        for i, name in enumerate(names):
            # Earlier steps drawn wider, so a line that coincides with a later one (both queues full,
            # two steps at the same rate) still shows around it.
            width = max(1.2, 3.6 - 0.6 * i)
            ax.plot(t, series[key][name], label=name, color=colors(i % 10), linewidth=width, alpha=0.9)
        ax.set_title(title, loc="left", fontsize=10)
        ax.grid(True, alpha=0.3)
        if key != "records_out_per_s":
            ax.set_ylim(-0.03, 1.03)
            ax.yaxis.set_major_formatter(matplotlib.ticker.PercentFormatter(1.0))
        else:
            ax.set_ylim(bottom=0)
        ax.axvline(result.started_s, color="0.5", linestyle="--", linewidth=1)
    axes[0].annotate(
        " first batch", (result.started_s, 1.0), xycoords=("data", "axes fraction"), va="top", fontsize=8, color="0.4"
    )
    axes[0].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9, title="stage")
    axes[-1].set_xlabel("seconds since the pipeline started")
    if result.diagnosis is not None:
        fig.suptitle(textwrap.fill(str(result.diagnosis), 110), fontsize=9)
    fig.savefig(os.fspath(path), dpi=110)
    plt.close(fig)


def main(args: Any, plugins: ZephonPluginManager) -> int:
    """The ``zephon profile`` command (``args`` from the CLI's parser)."""
    if args.seconds is not None and args.batches is not None:
        raise ConfigError("give --seconds or --batches, not both")
    if args.plot:  # fail before running for minutes, not after
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise ConfigError("--plot needs matplotlib: install it with: pip install 'zephon-observe[plot]'") from None
    pipeline = load_pipeline(args.definition, plugins)
    quiet = args.json or not _isatty(sys.stderr)
    result = run_profile(
        pipeline,
        seconds=args.seconds,
        batches=args.batches,
        consumer_ms=args.consumer_ms,
        trace=bool(args.trace),
        show_progress=not quiet,
    )
    if args.trace:
        Path(args.trace).write_text(json.dumps(result.trace))
    if args.plot:
        plot(result, args.plot)
    if args.json:
        out = result.to_json()
        out["plot"], out["trace"] = args.plot, args.trace
        print(json.dumps(out))
    else:
        print(format_table(result))
        for what, where in (("plot", args.plot), ("trace", args.trace)):
            if where:
                print(f"{what}: {where}")
    return 0


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
