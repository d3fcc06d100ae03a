"""The ``zephon`` command: list plugins, build format indexes, run a demo.

Each invocation builds one plugin manager and passes it to whatever the command runs, so what
``zephon plugins`` lists is exactly what ``zephon demo`` and ``zephon index`` use.
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
    from zephon_core.plugins import load_object

    registry = plugins.registry
    fmt = args.format or registry.detect_format(args.path)
    reg = registry.get("reader", fmt)
    builder = reg.extra.get("index")
    if builder is None:
        print(f"{args.path}: format {fmt!r} needs no index")
        return 0
    print(f"{args.path}: {load_object(builder)(args.path)}")
    return 0


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
    if not args.kernel and (demos or args.name):
        name = args.name or ("text" if "text" in demos else demos[0])
        if name not in demos:
            print(f"zephon: error: no demo {name!r}; installed: {', '.join(demos) or 'none'}", file=sys.stderr)
            return 2
        main = registry.get("demo", name).load()
        return int(main(["--quick"] if args.quick else [], plugins=plugins))
    from zephon_core import demo

    if not args.kernel:
        print("(install zephon-demo for the full text pipeline: tokenize, pack, token-aware mixing)")
    return 0 if demo.run(lanes=args.lanes, quick=args.quick, plugins=plugins) else 1


def main(argv: list[str] | None = None, *, plugins: ZephonPluginManager | None = None) -> int:
    """Run the command line ``argv``; ``plugins`` replaces the installed plugins (for tests and embedding)."""
    parser = argparse.ArgumentParser(prog="zephon", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("plugins", help="list installed readers, operators, runners and demos")
    p.add_argument("--kind", choices=["reader", "operator", "runner", "demo"])
    p.set_defaults(fn=_plugins)
    p = sub.add_parser("index", help="build the index a dataset's format needs, ahead of time")
    p.add_argument("path")
    p.add_argument("--format")
    p.set_defaults(fn=_index)
    p = sub.add_parser("demo", help="run the demo pipeline and check its determinism")
    p.add_argument("--lanes", type=int, default=4, help="lanes of the kernel demo (default 4)")
    p.add_argument("--quick", action="store_true", help="a shorter run")
    p.add_argument("--kernel", action="store_true", help="the kernel-only demo (no plugins needed)")
    p.add_argument("--name", help="which installed demo to run (default: text)")
    p.add_argument("--list", action="store_true", help="list the installed demos and exit")
    p.set_defaults(fn=_demo)
    args = parser.parse_args(argv)
    try:
        if plugins is None:
            from zephon_core.plugins import default_plugin_manager

            plugins = default_plugin_manager()  # inside the try: a broken plugin is a clean error
        return int(args.fn(args, plugins))
    except ZephonError as exc:
        print(f"zephon: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
