"""Token documents that check a packing operator, under their former kernel name: they live in zephon-pack.

Each name (``token_documents``, ``check_packed_rows``, ...) is looked up lazily in
:mod:`zephon_pack.checking`; without zephon-pack installed, using one is an error naming it.
"""

from __future__ import annotations

from typing import Any

from zephon_core.work.moved import resolve


def __getattr__(name: str) -> Any:
    return resolve(__name__, "zephon_pack.checking", "zephon-pack", name, globals())
