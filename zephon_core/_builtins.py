"""The kernel's own readers, operators, runners and ``zephon`` commands, registered like any plugin's."""

from __future__ import annotations

from zephon_core.hookspecs import KINDS, ReaderRegister, Register, Subparsers, hookimpl

ZEPHON_CONTRACT = (1, 0)
"""Checked like any plugin's (so the check itself runs on every manager)."""


@hookimpl
def zephon_register_operators(register: Register) -> None:
    register(
        name="map_transform",
        factory="zephon_core.ops.mapping:MapTransform",
        description="fn(payload) -> dict | None, on parallel workers",
    )
    register(
        name="flat_map",
        factory="zephon_core.ops.mapping:FlatMap",
        description="fn(payload) -> iterable of dicts (1 to n)",
    )
    register(
        name="stateful_transform",
        factory="zephon_core.ops.stateful:StatefulTransform",
        description="custom n-to-m operator from init_state/push/flush/transform",
    )
    register(
        name="decode_text",
        factory="zephon_core.ops.text:DecodeText",
        description="bytes -> str with an encoding, error policy and newline normalisation",
    )
    register(
        name="shuffle",
        factory="zephon_core.ops.shuffle:Shuffle",
        description="per-lane shuffle buffer with hash-derived draws",
    )


@hookimpl
def zephon_register_runners(register: Register) -> None:
    register(
        name="inline",
        factory="zephon_core.runtime.runners:InlineRunner",
        description="worker runs in the stage thread (reference)",
    )
    register(name="threads", factory="zephon_core.runtime.runners:ThreadRunner", description="thread pool per operator")
    register(
        name="processes",
        factory="zephon_core.runtime.processes:ProcessRunner",
        description="spawned process pool per operator",
    )


@hookimpl
def zephon_register_readers(register: ReaderRegister) -> None:
    register(
        name="memory",
        factory="zephon_core.work.readers:MemoryReader",
        detect=None,
        description="records held in memory (Dataset.from_records)",
    )


@hookimpl
def zephon_register_commands(subparsers: Subparsers) -> None:
    """The kernel's commands, through the same hook as any package's (the bodies are lazy strings).

    ``index``, ``show`` and ``inspect`` are about storage: zephon-storage brings them, through this
    same hook; ``stubs`` (editor tooling) comes with zephon-stubs, and the demos ``demo`` runs with
    zephon-demo.
    """
    p = subparsers.add_parser("plugins", help="list installed readers, operators, runners, demos and observers")
    p.add_argument("--kind", choices=list(KINDS), help="list only this kind")
    p.set_defaults(fn="zephon_core.cli:plugins_command")

    p = subparsers.add_parser("demo", help="run the demo pipeline and check its determinism")
    p.add_argument("--lanes", type=int, default=4, help="lanes of the kernel demo (default 4)")
    p.add_argument("--quick", action="store_true", help="a shorter run")
    p.add_argument("--kernel", action="store_true", help="the kernel-only demo (no reader or operator plugins needed)")
    p.add_argument("demo", nargs="?", metavar="NAME", help="which installed demo to run, e.g. zephon demo vlm (same as --name)")
    p.add_argument("--name", help="which installed demo to run (default: text)")
    p.add_argument("--list", action="store_true", help="list the installed demos and exit")
    p.set_defaults(fn="zephon_core.cli:demo_command")
