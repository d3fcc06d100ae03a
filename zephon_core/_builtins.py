"""The kernel's own readers, operators and runners, registered like any plugin's."""

from __future__ import annotations

from zephon_core.hookspecs import ReaderRegister, Register, hookimpl

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
