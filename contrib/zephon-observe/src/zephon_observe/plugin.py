"""Registration with Zephon (found through the ``zephon`` entry point in pyproject.toml).

Two hooks: the observers of three options (``manifest=PATH`` records every delivered microbatch,
``validate=`` probes the pipeline's own steps before it starts, ``autotune=True`` tunes parallelism
while it runs), and the ``zephon profile`` and ``zephon manifest`` commands. This module is imported whenever a plugin
manager is built (every ``Pipeline`` without ``plugins=``, every ``zephon`` invocation), so it only
names things: the factories and command bodies are lazy ``"module:attr"`` strings, and building the
commands' parsers needs nothing but argparse, which the CLI has already imported.
"""

from __future__ import annotations

from zephon_core.hookspecs import ObserverRegister, Subparsers, hookimpl

ZEPHON_CONTRACT = (1, 0)
"""The zephon plugin contract this plugin is built for (the kernel refuses an incompatible one)."""


@hookimpl
def zephon_register_observers(register: ObserverRegister) -> None:
    register(
        name="manifest",
        factory="zephon_observe.manifest:start_writer",
        check="zephon_observe.manifest:check_option",
        description="options(manifest=PATH): record the samples of every global step as Parquet",
    )
    register(
        name="validate",
        factory="zephon_observe.validation:probe_steps",
        description="options(validate='warn'|'strict'): probe the pipeline's own steps against the conformance rules",
    )
    register(
        name="autotune",
        factory="zephon_observe.autotune:AutoTuner",
        description="options(autotune=True): raise the parallelism of the limiting step while the pipeline runs",
    )


@hookimpl
def zephon_register_commands(subparsers: Subparsers) -> None:
    p = subparsers.add_parser(
        "profile",
        help="run a pipeline for a while and print where its time goes (per-stage table, bottleneck, plot, trace)",
    )
    p.add_argument("definition", help="a Python file with build_pipeline(), or a JSON/YAML pipeline definition")
    p.add_argument("--seconds", type=float, help="how long to run after the first batch (default 10)")
    p.add_argument("--batches", type=int, help="how many microbatches to take instead of --seconds")
    p.add_argument(
        "--consumer-ms", type=float, default=0.0, help="sleep per microbatch, standing in for a training step"
    )
    p.add_argument(
        "--plot", metavar="FILE.png", help="draw throughput, busy fraction and queue fill per stage over time"
    )
    p.add_argument("--trace", metavar="FILE.json", help="write worker task spans as a Chrome/Perfetto trace")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object (no table, no progress)")
    p.set_defaults(fn="zephon_observe.profile:main")
    p = subparsers.add_parser("manifest", help="read provenance manifests written with options(manifest=PATH)")
    msub = p.add_subparsers(dest="action", required=True, title="actions", metavar="ACTION")
    m = msub.add_parser("show", help="a manifest's summary, or what one global step held")
    m.add_argument("path", help="the manifest file")
    m.add_argument("--step", type=int, help="the global step to show")
    m.add_argument("--lane", type=int, help="only this lane of the step")
    m.add_argument("--json", action="store_true", help="print JSON")
    m = msub.add_parser("diff", help="the first global step where two runs differ, and which samples differ")
    m.add_argument("a", help="the first run's manifest")
    m.add_argument("b", help="the second run's manifest")
    m.add_argument("--max-rows", type=int, default=20, help="differing rows to list per lane (default 20)")
    p.set_defaults(fn="zephon_observe.manifest:command")
