"""Registration with Zephon (found through the ``zephon`` entry point in pyproject.toml).

The recipe commands come through the ``zephon_register_commands`` hook. This module is imported on
every ``zephon`` invocation and whenever a plugin manager is built, so it only builds parsers; the
command bodies are lazy ``"module:attr"`` strings (PyYAML and the recipe code load when a recipe
command runs).
"""

from __future__ import annotations

from zephon_core.hookspecs import Subparsers, hookimpl

ZEPHON_CONTRACT = (1, 0)
"""The zephon plugin contract this plugin is built for (the kernel refuses an incompatible one)."""

_SET_HELP = "override a key of the recipe, e.g. --set mixture.weights.web=0.6 (repeatable; the value is read as YAML)"


@hookimpl
def zephon_register_commands(subparsers: Subparsers) -> None:
    p = subparsers.add_parser("check", help="validate a recipe and print its plan (datasets, mixture, stages)")
    p.add_argument("recipe", help="the recipe file (.yaml, .yml or .toml)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help=_SET_HELP)
    p.add_argument(
        "--no-tokens", action="store_true", help="skip the token estimates (they tokenize a sample of each dataset)"
    )
    p.add_argument("--quiet", action="store_true", help="only validate: print one line")
    p.set_defaults(fn="zephon_recipes.cli:check_command")

    p = subparsers.add_parser(
        "run", help="dry-run a recipe for a few global steps: throughput, padding, realised mixture"
    )
    p.add_argument("recipe", help="the recipe file (.yaml, .yml or .toml)")
    p.add_argument("--steps", type=int, default=10, help="global steps to run (default 10)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help=_SET_HELP)
    p.add_argument("--manifest", metavar="PATH", help="also write the provenance manifest there (needs zephon-observe)")
    p.add_argument("--hashes", action="store_true", help="print the hash of every global batch")
    p.set_defaults(fn="zephon_recipes.cli:run_command")

    p = subparsers.add_parser(
        "diff", help="which differences between two recipes change the data, and which are performance-only"
    )
    p.add_argument("a", help="the first recipe")
    p.add_argument("b", help="the second recipe")
    p.add_argument(
        "--set", action="append", metavar="KEY=VALUE", help="override a key of the second recipe (repeatable)"
    )
    p.set_defaults(fn="zephon_recipes.cli:diff_command")

    p = subparsers.add_parser(
        "materialize",
        help="write the records a prefix of a recipe produces (e.g. up to tokenize) as Parquet or WebDataset shards",
    )
    p.add_argument("recipe", help="the recipe file (.yaml, .yml or .toml)")
    p.add_argument(
        "--until",
        required=True,
        metavar="OPERATOR",
        help="the last operator of the prefix, by name or index in the chain",
    )
    p.add_argument(
        "--to",
        required=True,
        metavar="DIR",
        help="the folder to write (rerun the same command to finish an interrupted run)",
    )
    p.add_argument(
        "--format", choices=("parquet", "webdataset"), default="parquet", help="shard format (default parquet)"
    )
    p.add_argument(
        "--chunks",
        type=int,
        metavar="N",
        help="materialise the first N chunks of the source (required when the mixture repeats)",
    )
    p.add_argument(
        "--shard-records", type=int, default=4096, metavar="N", help="records per shard per lane (default 4096)"
    )
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help=_SET_HELP)
    p.set_defaults(fn="zephon_recipes.cli:materialize_command")

    p = subparsers.add_parser(
        "recipe-schema", help="write the JSON Schema of recipes for the installed plugins (for editors)"
    )
    p.add_argument("-o", "--output", help="file to write (default: print it)")
    p.set_defaults(fn="zephon_recipes.cli:schema_command")
