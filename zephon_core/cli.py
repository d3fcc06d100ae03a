"""The ``zephon`` command line: argument wiring only; each command lives in its own module.

Every subcommand comes through the ``zephon_register_commands`` hook, the kernel's own
(``plugins`` and ``demo``, from :mod:`zephon_core._kernel`) like a package's (``show``,
``inspect`` and ``index`` from zephon-storage, ``profile`` and ``manifest`` from zephon-observe,
``stubs`` from zephon-stubs), so ``zephon --help`` lists what the installed packages bring, and a known command whose package is
not installed is an error saying what to install. Each invocation builds one plugin manager, builds
the parser from it and passes it to whatever the command runs, so what ``zephon plugins`` lists is
exactly what ``zephon show``, ``zephon demo`` and ``zephon index`` use. Help strings are plain
words (they are printed by ``--help``, where reStructuredText is noise).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from zephon_core.errors import PluginError, ZephonError

if TYPE_CHECKING:
    from zephon_core.plugins import ZephonPluginManager


def plugins_command(args: argparse.Namespace, plugins: ZephonPluginManager) -> int:
    """``zephon plugins``: every registration of the invocation's manager, as a table.

    A registration of a default plugin (:mod:`zephon_core.defaults`) ends in ``(default)``, or
    ``(essential)`` for one the kernel cannot run without.
    """
    from zephon_core.defaults import roles

    rows = plugins.listing()
    if args.kind:
        rows = [r for r in rows if r["kind"] == args.kind]
    widths = {k: max([len(k), *(len(r[k]) for r in rows)]) for k in ("name", "kind", "package", "version")}
    header = "  ".join(k.upper().ljust(widths[k]) for k in widths)
    print(header)
    marks = roles()
    for r in sorted(rows, key=lambda r: (r["kind"], r["name"])):
        mark = marks.get((r["kind"], r["name"])) if r["package"] == "zephon-core" else None
        print("  ".join(r[k].ljust(widths[k]) for k in widths) + (f"  ({mark})" if mark else ""))
    return 0


def demo_command(args: argparse.Namespace, plugins: ZephonPluginManager) -> int:
    """Run a demo registered through ``zephon_register_demos``.

    The default is the ``text`` demo when installed, else the first installed one by name;
    ``--kernel`` is the ``kernel`` demo, which needs no reader or operator plugin (both demos come
    with zephon-demo; ``--lanes`` is the kernel demo's). Without any demo installed, the error says
    what to install.
    """
    from zephon_core.plugins import KNOWN_PROVIDERS, install_hint

    registry = plugins.registry
    demos = registry.names("demo")
    if args.list:
        rows = [(r.name, f"{r.package} {r.version}", r.description) for r in (registry.get("demo", n) for n in demos)]
        if not rows:
            print(f"no demo is installed; {install_hint(DEMO_PACKAGE)}")
            return 0
        w0, w1 = (max(len(r[i]) for r in rows) for i in (0, 1))
        for name, source, description in rows:
            print(f"{name.ljust(w0)}  {source.ljust(w1)}  {description}")
        return 0
    named = [n for n in (args.demo, args.name, KERNEL_DEMO if args.kernel else None) if n]
    if len(set(named)) > 1:
        first, second = sorted(set(named))[:2]
        print(f"zephon: error: two demos named: {first!r} and {second!r}", file=sys.stderr)
        return 2
    name = named[0] if named else ("text" if "text" in demos or not demos else demos[0])
    if name not in demos:
        if ("demo", name) in KNOWN_PROVIDERS:
            registry.get("demo", name)  # raises PluginError naming the package to install
        print(f"zephon: error: no demo {name!r}; installed: {', '.join(demos) or 'none'}", file=sys.stderr)
        return 2
    argv = ["--quick"] if args.quick else []
    if name == KERNEL_DEMO:
        argv += ["--lanes", str(args.lanes)]
    main = registry.get("demo", name).load()
    return int(main(argv, plugins=plugins))


DEMO_PACKAGE = "zephon-demo"
"""The distribution with the ``text`` and ``kernel`` demos."""
KERNEL_DEMO = "kernel"
"""The demo ``zephon demo --kernel`` runs."""


DESCRIPTION = "Deterministic online data loading: look at datasets, index them, run demos and profiles."


def _known_commands() -> dict[str, str]:
    """First-party commands by name, with the package that brings each (``profile``: zephon-observe)."""
    from zephon_core.plugins import KNOWN_PROVIDERS

    return {name: package for (kind, name), package in KNOWN_PROVIDERS.items() if kind == "command"}


def build_parser(plugins: ZephonPluginManager | None = None) -> argparse.ArgumentParser:
    """The whole command line, from what ``plugins`` (default: the installed plugins) register.

    Separate from :func:`main` so tests can walk every subcommand's help. The epilog of ``--help``
    says which package brought each command that is not the kernel's, and which known commands are
    missing and what to install for them.

    Raises:
        PluginError: a plugin failed to load, or two packages add the same command.
    """
    if plugins is None:
        from zephon_core.plugins import default_plugin_manager

        plugins = default_plugin_manager()
    parser = argparse.ArgumentParser(
        prog="zephon", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--version", action="store_true", help="print the version of zephon-core and of every installed plugin"
    )
    sub = parser.add_subparsers(dest="command", title="commands", metavar="COMMAND")
    owners = plugins.add_commands(sub)
    by_package: dict[str, list[str]] = {}
    for name, (package, version) in owners.items():
        if package != "zephon-core":
            by_package.setdefault(f"{package} {version}", []).append(name)
    lines = [f"  {', '.join(names)}: from {package}" for package, names in by_package.items()]
    missing: dict[str, list[str]] = {}
    for name, package in _known_commands().items():
        if name not in sub.choices:
            missing.setdefault(package, []).append(name)
    lines += [f"  {', '.join(names)}: not installed (pip install {package})" for package, names in missing.items()]
    if lines:
        parser.epilog = "commands from other packages:\n" + "\n".join(lines)
    return parser


def _missing_command(argv: list[str], parser: argparse.ArgumentParser) -> str | None:
    """The error for a first-party command whose package is not installed (``zephon profile`` without
    zephon-observe), or None: argparse's own "invalid choice" would not say what to install."""
    from zephon_core.plugins import install_hint

    command = next((a for a in argv if not a.startswith("-")), None)
    package = _known_commands().get(command or "")
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    if package is None or command in sub.choices:
        return None
    return f"the command {command!r} is not installed; {install_hint(package)}"


def main(argv: list[str] | None = None, *, plugins: ZephonPluginManager | None = None) -> int:
    """Run the command line ``argv``; ``plugins`` replaces the installed plugins (for tests and embedding)."""
    from zephon_core.plugins import load_object

    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        if plugins is None:
            from zephon_core.plugins import default_plugin_manager

            plugins = default_plugin_manager()  # inside the try: a broken plugin is a clean error
        parser = build_parser(plugins)
    except ZephonError as exc:
        print(f"zephon: error: {exc}", file=sys.stderr)
        return 2
    missing = _missing_command(argv, parser)
    if missing is not None:
        print(f"zephon: error: {missing}", file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    if not args.version and args.command is None:
        parser.error("a command is required (see zephon --help)")
    try:
        if args.version:
            from zephon_core import cli_meta

            return cli_meta.version(plugins)
        fn = load_object(args.fn)
        if not callable(fn):
            raise PluginError(f"zephon {args.command}: its command {args.fn!r} is not callable")
        return int(fn(args, plugins))
    except ZephonError as exc:
        print(f"zephon: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
