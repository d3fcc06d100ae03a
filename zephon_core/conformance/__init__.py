"""The determinism conformance suite.

Subclass :class:`OperatorConformance` or :class:`ReaderConformance` in a test module and override
the fixtures that describe your implementation; or run it with no code at all::

    pytest --pyargs zephon_core.conformance --zephon-operator=NAME --zephon-config='{...}'
    pytest --pyargs zephon_core.conformance --zephon-reader=NAME --zephon-path=PATH

The suite takes its plugin manager from the ``zephon_plugins`` fixture (a fresh manager per test;
override it to test a plugin that is not installed); :func:`get_zephon_plugins` reads it from code
that is not a fixture.

Names are imported lazily so the pytest plugin that ships with the kernel stays cheap to load.
``ReaderConformance`` lives in the reader test kit of zephon-storage (every reader builds on it):
it resolves there, and names that distribution when it is not installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "OperatorConformance": "zephon_core.conformance.operators",
    "ReaderConformance": "zephon_storage.testing.conformance",
    "Capabilities": "zephon_core.conformance.rules",
    "ReaderCapabilities": "zephon_core.conformance.rules",
    "RULES": "zephon_core.conformance.rules",
    "get_zephon_plugins": "zephon_core.conformance.pytest_plugin",
    "digest_payload": "zephon_core.hashing",  # what the suites compare records by
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    mod = _EXPORTS.get(name)
    if mod is None:
        raise AttributeError(name)
    from zephon_core.work.moved import home  # names zephon-storage if the reader kit is missing

    return getattr(home(f"zephon_core.conformance.{name}", mod, "zephon-storage"), name)


if TYPE_CHECKING:
    from zephon_storage.testing.conformance import ReaderConformance

    from zephon_core.conformance.operators import OperatorConformance
    from zephon_core.conformance.pytest_plugin import get_zephon_plugins
    from zephon_core.conformance.rules import RULES, Capabilities, ReaderCapabilities
    from zephon_core.hashing import digest_payload
