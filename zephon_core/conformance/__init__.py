"""The determinism conformance suite.

Subclass :class:`OperatorConformance` or :class:`ReaderConformance` in a test module and override
the fixtures that describe your implementation; or run it with no code at all::

    pytest --pyargs zephon_core.conformance --zephon-operator=NAME --zephon-config='{...}'
    pytest --pyargs zephon_core.conformance --zephon-reader=NAME --zephon-path=PATH

The suite takes its plugin manager from the ``zephon_plugins`` fixture (a fresh manager per test;
override it to test a plugin that is not installed); :func:`get_zephon_plugins` reads it from code
that is not a fixture.

Names are imported lazily so the pytest plugin that ships with the kernel stays cheap to load.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "OperatorConformance": "zephon_core.conformance.operators",
    "ReaderConformance": "zephon_core.conformance.readers",
    "Capabilities": "zephon_core.conformance.rules",
    "ReaderCapabilities": "zephon_core.conformance.rules",
    "RULES": "zephon_core.conformance.rules",
    "get_zephon_plugins": "zephon_core.conformance.pytest_plugin",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    mod = _EXPORTS.get(name)
    if mod is None:
        raise AttributeError(name)
    import importlib

    return getattr(importlib.import_module(mod), name)


if TYPE_CHECKING:
    from zephon_core.conformance.operators import OperatorConformance
    from zephon_core.conformance.pytest_plugin import get_zephon_plugins
    from zephon_core.conformance.readers import ReaderConformance
    from zephon_core.conformance.rules import RULES, Capabilities, ReaderCapabilities
