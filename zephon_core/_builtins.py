"""The kernel's own readers, operators and runners, registered like any plugin's."""

from __future__ import annotations

from typing import Any

from zephon_core.hookspecs import hookimpl


@hookimpl
def zephon_register_operators(register: Any) -> None:
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
        name="shuffle",
        factory="zephon_core.ops.shuffle:Shuffle",
        description="per-lane shuffle buffer with hash-derived draws",
    )
    register(
        name="batch", factory="zephon_core.ops.batch:Batch", description="fixed-size microbatches per lane (terminal)"
    )
    register(
        name="fetch",
        factory="zephon_core.ops.fetch:Fetch",
        description="resolves pointers into payloads (implicit first stage)",
    )


@hookimpl
def zephon_register_runners(register: Any) -> None:
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
def zephon_register_readers(register: Any) -> None:
    register(
        name="memory",
        factory="zephon_core.work.readers:MemoryReader",
        detect=None,
        description="records held in memory (Dataset.from_records)",
    )
