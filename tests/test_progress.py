"""The kernel's progress display (``zephon index``, ``zephon demo``, zephon-observe's ``zephon profile``):
a bar on a terminal, nothing at all otherwise."""

from __future__ import annotations

import io
import sys

import pytest

from zephon_core.progress import Progress


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_draws_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    quiet = io.StringIO()
    with Progress(10, "work", stream=quiet) as bar:
        bar.update(10)
    assert quiet.getvalue() == ""
    tty = _Tty()
    with Progress(10, "work", stream=tty) as bar:
        bar.update(10)
    assert "work" in tty.getvalue() and "10/10" in tty.getvalue()  # tqdm
    monkeypatch.setitem(sys.modules, "tqdm", None)
    monkeypatch.setitem(sys.modules, "rich", None)
    monkeypatch.setitem(sys.modules, "rich.progress", None)
    plain = _Tty()
    with Progress(4, "plain", "steps", stream=plain) as bar:
        for _ in range(4):
            bar.update(1)
    assert "plain [" in plain.getvalue() and "4/4 steps" in plain.getvalue() and plain.getvalue().endswith("\n")
