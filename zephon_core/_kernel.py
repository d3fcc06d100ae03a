"""The kernel's own registrations, made like any plugin's: its runners and ``zephon`` commands, which are
parts of the kernel and cannot be blocked (unlike the default plugins, :mod:`zephon_core.defaults`)."""

from __future__ import annotations

from zephon_core.hookspecs import KINDS, Register, Subparsers, hookimpl

ZEPHON_CONTRACT = (1, 0)
"""Checked like any plugin's (so the check itself runs on every manager)."""


@hookimpl
def zephon_register_runners(register: Register) -> None:
    for name, factory, description in (
        ("inline", "zephon_core.runtime.runners:InlineRunner", "worker runs in the stage thread (reference)"),
        ("threads", "zephon_core.runtime.runners:ThreadRunner", "thread pool per operator"),
        ("processes", "zephon_core.runtime.processes:ProcessRunner", "spawned process pool per operator"),
    ):
        register(name=name, factory=factory, description=description)


@hookimpl
def zephon_register_commands(subparsers: Subparsers) -> None:
    """The kernel's commands, through the same hook as any package's (the bodies are lazy strings)."""
    p = subparsers.add_parser("plugins", help="list installed readers, operators, runners, demos and observers")
    p.add_argument("--kind", choices=list(KINDS), help="list only this kind")
    p.set_defaults(fn="zephon_core.cli:plugins_command")

    p = subparsers.add_parser("demo", help="run the demo pipeline and check its determinism")
    p.add_argument("--lanes", type=int, default=4, help="lanes of the kernel demo (default 4)")
    p.add_argument("--quick", action="store_true", help="a shorter run")
    p.add_argument("--kernel", action="store_true", help="the kernel-only demo (no reader or operator plugins needed)")
    p.add_argument(
        "demo", nargs="?", metavar="NAME", help="which installed demo to run, e.g. zephon demo vlm (same as --name)"
    )
    p.add_argument("--name", help="which installed demo to run (default: text)")
    p.add_argument("--list", action="store_true", help="list the installed demos and exit")
    p.set_defaults(fn="zephon_core.cli:demo_command")
