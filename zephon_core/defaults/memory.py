"""Default plugin (essential): the ``memory`` reader, records held in memory (``Dataset.from_records``).

The reader, :class:`~zephon_core.work.readers.MemoryReader`, sits beside the reader contract it is
the reference for; this module only registers it, through the same hook as any reader plugin.
"""

from __future__ import annotations

from zephon_core.hookspecs import ReaderRegister, hookimpl

ZEPHON_CONTRACT = (1, 0)
"""Checked like any plugin's."""


@hookimpl
def zephon_register_readers(register: ReaderRegister) -> None:
    register(
        name="memory",
        factory="zephon_core.work.readers:MemoryReader",
        detect=None,
        description="records held in memory (Dataset.from_records)",
    )
