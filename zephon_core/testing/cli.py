"""Run the ``zephon`` command line inside a test: :func:`run_cli`.

A plugin that contributes commands (``zephon_register_commands``) tests them through the same entry
point a user types, in-process, so a failure shows its traceback and coverage sees the command.
"""

from __future__ import annotations

import contextlib
import io

__all__ = ["run_cli"]


def run_cli(*argv: str) -> tuple[int, str, str]:
    """Run the ``zephon`` command line in this process: ``(exit status, stdout, stderr)``."""
    from zephon_core.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()
