"""Default plugin: the built-in operators, registered through ``zephon_register_operators``.

``map_transform`` and ``flat_map`` (:mod:`.mapping`), ``stateful_transform`` (:mod:`.stateful`),
``decode_text`` (:mod:`.text`) and ``shuffle`` (:mod:`.shuffle`); :mod:`.function_operator` is the
base that plugins' ``map_transform`` operators build on. Not essential: blocking this plugin
(``ZephonPluginManager(block=["zephon_core.defaults.operators"])``) leaves a pipeline with the
operators of installed packages only.
"""

from __future__ import annotations

from zephon_core.hookspecs import Register, hookimpl

ZEPHON_CONTRACT = (1, 0)
"""Checked like any plugin's."""


@hookimpl
def zephon_register_operators(register: Register) -> None:
    register(
        name="map_transform",
        factory="zephon_core.defaults.operators.mapping:MapTransform",
        description="fn(payload) -> dict | None, on parallel workers",
    )
    register(
        name="flat_map",
        factory="zephon_core.defaults.operators.mapping:FlatMap",
        description="fn(payload) -> iterable of dicts (1 to n)",
    )
    register(
        name="stateful_transform",
        factory="zephon_core.defaults.operators.stateful:StatefulTransform",
        description="custom n-to-m operator from init_state/push/flush/transform",
    )
    register(
        name="decode_text",
        factory="zephon_core.defaults.operators.text:DecodeText",
        description="bytes -> str with an encoding, error policy and newline normalisation",
    )
    register(
        name="shuffle",
        factory="zephon_core.defaults.operators.shuffle:Shuffle",
        description="per-lane shuffle buffer with hash-derived draws",
    )
