"""The ``zephon`` command: list plugins, build format indexes, run the demo."""

from __future__ import annotations

import argparse
import sys

from zephon_core.errors import ZephonError


def _plugins(args: argparse.Namespace) -> int:
    from zephon_core.plugins import get_plugin_manager

    rows = get_plugin_manager().listing()
    if args.kind:
        rows = [r for r in rows if r["kind"] == args.kind]
    widths = {k: max(len(k), *(len(r[k]) for r in rows)) for k in ("name", "kind", "package", "version")}
    header = "  ".join(k.upper().ljust(widths[k]) for k in widths)
    print(header)
    for r in sorted(rows, key=lambda r: (r["kind"], r["name"])):
        print("  ".join(r[k].ljust(widths[k]) for k in widths))
    return 0


def _index(args: argparse.Namespace) -> int:
    from zephon_core.plugins import get_plugin_manager, load_object

    registry = get_plugin_manager().registry
    fmt = args.format or registry.detect_format(args.path)
    reg = registry.get("reader", fmt)
    builder = reg.extra.get("index")
    if builder is None:
        print(f"{args.path}: format {fmt!r} needs no index")
        return 0
    print(f"{args.path}: {load_object(builder)(args.path)}")
    return 0


def _installed_demos() -> dict[str, object]:
    """Demos registered by installed packages under the ``zephon.demos`` entry-point group."""
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group="zephon.demos")}


def _demo(args: argparse.Namespace) -> int:
    demos = _installed_demos()
    if not args.kernel and demos:
        name = args.name or ("text" if "text" in demos else sorted(demos)[0])
        if name not in demos:
            print(f"zephon: error: no demo {name!r}; installed: {', '.join(sorted(demos))}", file=sys.stderr)
            return 2
        main = demos[name].load()  # type: ignore[attr-defined]
        return int(main(["--quick"] if args.quick else []))
    from zephon_core import demo

    if not args.kernel:
        print("(install zephon-demo for the full text pipeline: tokenize, pack, token-aware mixing)")
    return 0 if demo.run(lanes=args.lanes, quick=args.quick) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="zephon", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("plugins", help="list installed readers, operators and runners")
    p.add_argument("--kind", choices=["reader", "operator", "runner"])
    p.set_defaults(fn=_plugins)
    p = sub.add_parser("index", help="build the index a dataset's format needs, ahead of time")
    p.add_argument("path")
    p.add_argument("--format")
    p.set_defaults(fn=_index)
    p = sub.add_parser("demo", help="run the demo pipeline and check its determinism")
    p.add_argument("--lanes", type=int, default=4)
    p.add_argument("--quick", action="store_true", help="a shorter run")
    p.add_argument("--kernel", action="store_true", help="the kernel-only demo (no plugins needed)")
    p.add_argument("--name", help="which installed demo to run (default: text)")
    p.set_defaults(fn=_demo)
    args = parser.parse_args(argv)
    try:
        return int(args.fn(args))
    except ZephonError as exc:
        print(f"zephon: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
