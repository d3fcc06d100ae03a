"""Registration with Zephon (found through the ``zephon`` entry point in pyproject.toml).

One hook: the ``zephon stubs`` command. This module is imported whenever a plugin manager is built,
so it only declares the parser; the body is the lazy string ``"zephon_stubs.command:main"``.
"""

from __future__ import annotations

from zephon_core.hookspecs import Subparsers, hookimpl

ZEPHON_CONTRACT = (1, 0)
"""The zephon plugin contract this plugin is built for (the kernel refuses an incompatible one)."""


@hookimpl
def zephon_register_commands(subparsers: Subparsers) -> None:
    p = subparsers.add_parser("stubs", help="write a type stub of the Pipeline builder that includes plugin operators")
    p.add_argument(
        "-o",
        "--output",
        default="typings",
        help="folder to write the stub package into (default ./typings; - prints the stub instead)",
    )
    p.set_defaults(fn="zephon_stubs.command:main")
