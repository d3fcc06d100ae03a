"""The ``zephon`` command line: argument wiring only; each command lives in its own module.

Each invocation builds one plugin manager and passes it to whatever the command runs, so what
``zephon plugins`` lists is exactly what ``zephon show``, ``zephon demo`` and ``zephon index`` use.
Help strings are plain words (they are printed by ``--help``, where reStructuredText is noise).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from zephon_core.errors import ZephonError

if TYPE_CHECKING:
    from zephon_core.plugins import ZephonPluginManager


def _plugins(args: argparse.Namespace, plugins: ZephonPluginManager) -> int:
    rows = plugins.listing()
    if args.kind:
        rows = [r for r in rows if r["kind"] == args.kind]
    widths = {k: max([len(k), *(len(r[k]) for r in rows)]) for k in ("name", "kind", "package", "version")}
    header = "  ".join(k.upper().ljust(widths[k]) for k in widths)
    print(header)
    for r in sorted(rows, key=lambda r: (r["kind"], r["name"])):
        print("  ".join(r[k].ljust(widths[k]) for k in widths))
    return 0


def _index(args: argparse.Namespace, plugins: ZephonPluginManager) -> int:
    from zephon_core import cli_index

    return cli_index.build(args, plugins)


def _show(args: argparse.Namespace, plugins: ZephonPluginManager) -> int:
    from zephon_core import cli_data

    return cli_data.show(args, plugins)


def _inspect(args: argparse.Namespace, plugins: ZephonPluginManager) -> int:
    from zephon_core import cli_data

    return cli_data.inspect_dataset(args, plugins)


def _stubs(args: argparse.Namespace, plugins: ZephonPluginManager) -> int:
    from zephon_core import cli_meta

    return cli_meta.stubs(args, plugins)


def _demo(args: argparse.Namespace, plugins: ZephonPluginManager) -> int:
    """Run a demo registered through ``zephon_register_demos``, else the kernel's own.

    The default is the ``text`` demo (from zephon-demo) when installed, else the first installed
    one by name, else the kernel demo, which needs no plugins (``--kernel`` forces it).
    """
    registry = plugins.registry
    demos = registry.names("demo")
    if args.list:
        regs = [registry.get("demo", n) for n in demos]
        rows = [(r.name, f"{r.package} {r.version}", r.description) for r in regs]
        rows.append(("kernel", "zephon-core (--kernel)", "the kernel-only demo: no plugins needed"))
        w0, w1 = (max(len(r[i]) for r in rows) for i in (0, 1))
        for name, source, description in rows:
            print(f"{name.ljust(w0)}  {source.ljust(w1)}  {description}")
        return 0
    if args.demo and args.name and args.demo != args.name:
        print(f"zephon: error: two demos named: {args.demo!r} and --name {args.name!r}", file=sys.stderr)
        return 2
    if not args.kernel and (demos or args.name or args.demo):
        name = args.name or args.demo or ("text" if "text" in demos else demos[0])
        if name not in demos:
            print(f"zephon: error: no demo {name!r}; installed: {', '.join(demos) or 'none'}", file=sys.stderr)
            return 2
        main = registry.get("demo", name).load()
        return int(main(["--quick"] if args.quick else [], plugins=plugins))
    from zephon_core import demo

    if not args.kernel:
        print("(install zephon-demo for the full text pipeline: tokenize, pack, token-aware mixing)")
    return 0 if demo.run(lanes=args.lanes, quick=args.quick, plugins=plugins) else 1


def _profile(args: argparse.Namespace, plugins: ZephonPluginManager) -> int:
    from zephon_core import profile

    return profile.main(args, plugins)


def _manifest(args: argparse.Namespace, plugins: ZephonPluginManager) -> int:
    """``manifest show`` prints a summary or one step; ``manifest diff`` exits 1 when the runs differ."""
    from zephon_core import manifest

    if args.action == "show":
        print(manifest.show(args.path, step=args.step, lane=args.lane, as_json=args.json))
        return 0
    result = manifest.diff(args.a, args.b, max_rows=args.max_rows)
    print(result)
    return 0 if result.step is None else 1


DESCRIPTION = "Deterministic online data loading: look at datasets, index them, run demos and profiles."


def build_parser() -> argparse.ArgumentParser:
    """The whole command line (separate from :func:`main` so tests can walk every subcommand's help)."""
    parser = argparse.ArgumentParser(prog="zephon", description=DESCRIPTION)
    parser.add_argument(
        "--version", action="store_true", help="print the version of zephon-core and of every installed plugin"
    )
    sub = parser.add_subparsers(dest="command", title="commands", metavar="COMMAND")
    p = sub.add_parser("plugins", help="list installed readers, operators, runners and demos")
    p.add_argument("--kind", choices=["reader", "operator", "runner", "demo", "validator"], help="list only this kind")
    p.set_defaults(fn=_plugins)

    fmt_help = "the data format, skipping detection (one of the installed readers: see zephon plugins)"
    p = sub.add_parser("show", help="print the first samples of a dataset and the schema they show")
    p.add_argument("path", help="a dataset folder, file or fsspec URL")
    p.add_argument("-n", type=int, default=5, help="how many samples to print (default 5)")
    p.add_argument("--format", help=fmt_help)
    p.set_defaults(fn=_show)
    p = sub.add_parser("inspect", help="print a dataset's format, its shards with their sizes, and totals")
    p.add_argument("path", help="a dataset folder, file or fsspec URL")
    p.add_argument("--format", help=fmt_help)
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.set_defaults(fn=_inspect)

    p = sub.add_parser(
        "index",
        help="build the index and manifest of a dataset ahead of time; optionally checksum and validate it",
    )
    p.add_argument("path", help="a dataset folder, file or fsspec URL")
    p.add_argument("--format", help=fmt_help)
    p.add_argument(
        "--checksum", action="store_true", help="record each file's SHA-256 in the manifest (for verify='checksum')"
    )
    p.add_argument(
        "--validate",
        action="store_true",
        help="read every record, decode its fields with the installed field validators (e.g. images with "
        "zephon-vision), and list the bad ones (exit status 1 if any)",
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=None,
        help="files indexed at once, in threads, and worker processes for --validate (default: CPUs)",
    )
    p.set_defaults(fn=_index)

    p = sub.add_parser("stubs", help="write a type stub of the Pipeline builder that includes plugin operators")
    p.add_argument(
        "-o",
        "--output",
        default="typings",
        help="folder to write the stub package into (default ./typings; - prints the stub instead)",
    )
    p.set_defaults(fn=_stubs)

    p = sub.add_parser("demo", help="run the demo pipeline and check its determinism")
    p.add_argument("--lanes", type=int, default=4, help="lanes of the kernel demo (default 4)")
    p.add_argument("--quick", action="store_true", help="a shorter run")
    p.add_argument("--kernel", action="store_true", help="the kernel-only demo (no plugins needed)")
    p.add_argument("demo", nargs="?", metavar="NAME", help="which installed demo to run, e.g. zephon demo vlm (same as --name)")
    p.add_argument("--name", help="which installed demo to run (default: text)")
    p.add_argument("--list", action="store_true", help="list the installed demos and exit")
    p.set_defaults(fn=_demo)
    p = sub.add_parser(
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
    p.set_defaults(fn=_profile)
    p = sub.add_parser("manifest", help="read provenance manifests written with options(manifest=PATH)")
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
    p.set_defaults(fn=_manifest)
    return parser


def main(argv: list[str] | None = None, *, plugins: ZephonPluginManager | None = None) -> int:
    """Run the command line ``argv``; ``plugins`` replaces the installed plugins (for tests and embedding)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.version and args.command is None:
        parser.error("a command is required (see zephon --help)")
    try:
        if plugins is None:
            from zephon_core.plugins import default_plugin_manager

            plugins = default_plugin_manager()  # inside the try: a broken plugin is a clean error
        if args.version:
            from zephon_core import cli_meta

            return cli_meta.version(plugins)
        return int(args.fn(args, plugins))
    except ZephonError as exc:
        print(f"zephon: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
