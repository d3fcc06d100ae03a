"""Progress for long CLI work: a bar on a terminal, nothing at all otherwise.

``zephon index``, ``zephon demo`` and ``zephon profile`` can run for minutes; a person at a terminal
wants to see them move, while a script or CI log reading their output wants only the result, with
no carriage-return noise mixed in. So :func:`progress` draws on stderr only when stderr is a
terminal: with tqdm if it is installed, else rich, else one plain line rewritten in place. It
imports neither library unless it draws.
"""

from __future__ import annotations

import sys
import threading
import time
from types import TracebackType
from typing import Any, TextIO


class Progress:
    """A progress display; ``update(n)`` advances it, ``close()`` (or leaving ``with``) ends its line.

    Args:
        total: the expected count (None: unknown, show the count and the rate only).
        desc: what is counted, shown before the bar.
        unit: the unit's name.
        stream: where to draw (default stderr).
        draw: None (default) draws only when ``stream`` is a terminal; True or False decide.
        timer: the count is elapsed seconds (no rate is shown, "per second" of seconds being noise).
    """

    def __init__(
        self,
        total: float | None = None,
        desc: str = "",
        unit: str = "it",
        stream: TextIO | None = None,
        draw: bool | None = None,
        timer: bool = False,
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.total, self.desc, self.unit = total, desc, unit
        self.n: float = 0
        self.extra = ""
        self.timer = timer
        self.enabled = _isatty(self.stream) if draw is None else draw
        self._bar: Any = None
        self._rich: Any = None
        self._task: Any = None
        self._t0 = time.monotonic()
        self._last = 0.0
        if self.enabled:
            self._open()

    def _open(self) -> None:
        try:
            from tqdm import tqdm

            fmt = None
            if self.timer:
                fmt = (
                    "{desc}: {percentage:3.0f}%|{bar}| {n:.0f}/{total:.0f} s{postfix}"
                    if self.total
                    else "{desc}: {elapsed}{postfix}"
                )
            unit = f" {self.unit}" if len(self.unit) > 2 else self.unit  # "12 microbatches", but "12it"
            self._bar = tqdm(total=self.total, desc=self.desc, unit=unit, file=self.stream, leave=True, bar_format=fmt)
            return
        except ImportError:
            pass
        try:
            from rich.console import Console
            from rich.progress import Progress as RichProgress

            self._rich = RichProgress(console=Console(file=self.stream), transient=False)
            self._rich.start()
            self._task = self._rich.add_task(self.desc, total=self.total)
        except ImportError:
            pass

    def update(self, n: float = 1) -> None:
        """Advance by ``n``."""
        self.n += n
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.update(n)
        elif self._rich is not None:
            self._rich.update(self._task, advance=n)
        else:
            now = time.monotonic()
            if now - self._last >= 0.1 or (self.total is not None and self.n >= self.total):
                self._last = now
                self._plain()

    def set(self, n: float) -> None:
        """Move to ``n`` (clamped to the total): for progress measured in elapsed time."""
        if self.total is not None:
            n = min(n, self.total)
        if n > self.n:
            self.update(n - self.n)

    def note(self, text: str) -> None:
        """Text shown after the count (e.g. what has been done so far), refreshed with the next update."""
        self.extra = text
        if self.enabled and self._bar is not None:
            self._bar.set_postfix_str(text, refresh=False)
        elif self.enabled and self._rich is not None:
            self._rich.update(self._task, description=f"{self.desc} {text}")

    def _plain(self) -> None:
        rate = self.n / max(1e-9, time.monotonic() - self._t0)
        if self.total:
            filled = int(30 * min(1.0, self.n / self.total))
            text = f"\r{self.desc} [{'#' * filled}{'.' * (30 - filled)}] {self.n:,.0f}/{self.total:,.0f} {self.unit}"
        else:
            text = f"\r{self.desc} {self.n:,.0f} {self.unit}"
        notes = [] if self.timer else [f"{rate:,.1f} {self.unit}/s"]
        notes += [self.extra] if self.extra else []
        self.stream.write(text + (f" ({', '.join(notes)})" if notes else ""))
        self.stream.flush()

    def close(self) -> None:
        if not self.enabled:
            return
        self.enabled = False
        if self._bar is not None:
            self._bar.close()
        elif self._rich is not None:
            self._rich.stop()
        else:
            self._plain()
            self.stream.write("\n")
            self.stream.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def progress(total: float | None = None, desc: str = "", unit: str = "it", stream: TextIO | None = None) -> Progress:
    """A :class:`Progress` that draws on ``stream`` (stderr) only when it is a terminal."""
    return Progress(total, desc, unit, stream)


class Ticker:
    """Elapsed seconds on a terminal while one opaque call runs (e.g. an index build): a thread ticks
    a :class:`Progress` with no total every 0.2 s. Nothing happens when stderr is not a terminal."""

    def __init__(self, desc: str, stream: TextIO | None = None, draw: bool | None = None) -> None:
        self.bar = Progress(None, desc, "s", stream, draw, timer=True)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Ticker:
        if self.bar.enabled:
            self._thread = threading.Thread(target=self._tick, name="zephon-progress", daemon=True)
            self._thread.start()
        return self

    def _tick(self) -> None:
        while not self._stop.wait(0.2):
            self.bar.update(0.2)

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(1.0)
        self.bar.close()


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
