"""Run-time validation (``options(validate=...)``), under its former kernel name: it lives in zephon-observe.

Each name (``ValidationWarning``, ``probe_operator``, ...) is looked up lazily in
:mod:`zephon_observe.validation`; without zephon-observe installed, using one is an error naming it.
"""

from __future__ import annotations

from typing import Any

from zephon_core.work.moved import resolve


def __getattr__(name: str) -> Any:
    return resolve(__name__, "zephon_observe.validation", "zephon-observe", name, globals())
