"""Registration with Zephon (found through the ``zephon`` entry point in pyproject.toml).

zephon-storage is a library that reader plugins build on, and it brings the commands about stored
datasets: ``zephon show``, ``zephon inspect`` and ``zephon index``, through the
``zephon_register_commands`` hook. This module is imported whenever a plugin manager is built, so
it only names things: the command bodies are lazy ``"module:function"`` strings, and building
their parsers needs nothing but argparse, which the CLI has already imported.
"""

from __future__ import annotations

from zephon_core.hookspecs import Subparsers, hookimpl

ZEPHON_CONTRACT = (1, 0)
"""The zephon plugin contract this plugin is built for (the kernel refuses an incompatible one)."""

FORMAT_HELP = "the data format, skipping detection (one of the installed readers: see zephon plugins)"


@hookimpl
def zephon_register_commands(subparsers: Subparsers) -> None:
    p = subparsers.add_parser("show", help="print the first samples of a dataset and the schema they show")
    p.add_argument("path", help="a dataset folder, file or fsspec URL")
    p.add_argument("-n", type=int, default=5, help="how many samples to print (default 5)")
    p.add_argument("--format", help=FORMAT_HELP)
    p.set_defaults(fn="zephon_storage.cli_data:show")
    p = subparsers.add_parser("inspect", help="print a dataset's format, its shards with their sizes, and totals")
    p.add_argument("path", help="a dataset folder, file or fsspec URL")
    p.add_argument("--format", help=FORMAT_HELP)
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.set_defaults(fn="zephon_storage.cli_data:inspect_dataset")

    p = subparsers.add_parser(
        "index",
        help="build the index and manifest of a dataset ahead of time; optionally checksum and validate it",
    )
    p.add_argument("path", help="a dataset folder, file or fsspec URL")
    p.add_argument("--format", help=FORMAT_HELP)
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
    p.set_defaults(fn="zephon_storage.cli_index:build")
