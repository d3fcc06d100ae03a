"""Worker functions that misbehave on purpose, for tests of error handling on every runner.

They live in an importable module (not a test file) so process and Ray workers can load them by
reference, and so kernel, runner and plugin tests share one copy. Each acts on the record whose
``"i"`` field is 7 and passes every other record through.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any


def fail_on_seven(payload: dict[str, Any]) -> dict[str, Any]:
    """Raises for record 7 (a bug in a user function)."""
    if payload["i"] == 7:
        raise ValueError("seven is not allowed")
    return payload


def die_on_seven(payload: dict[str, Any]) -> dict[str, Any]:
    """Kills its own worker process at record 7 (a crash, an out-of-memory kill)."""
    if payload["i"] == 7:
        os.kill(os.getpid(), signal.SIGKILL)
    return payload


def hang_on_seven(payload: dict[str, Any]) -> dict[str, Any]:
    """Never returns for record 7 (a hung user function)."""
    if payload["i"] == 7:
        while True:
            time.sleep(0.05)
    return payload
