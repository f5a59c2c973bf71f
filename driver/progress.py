"""A live status line on a terminal (bench progress, run and teleop status); silent off a TTY."""

from __future__ import annotations

import logging
import sys
import time
from typing import TextIO


class _ClearLine(logging.Filter):
    """Erases the status line before a log record is written to the same stream."""

    def __init__(self, progress: Progress) -> None:
        super().__init__()
        self._progress = progress

    def filter(self, record: logging.LogRecord) -> bool:
        self._progress.clear_line()
        return True


class Progress:
    """Prints carriage-return-refreshed status lines at most ``hz`` times per wall-clock second.

    Args:
        total: the amount of work (e.g. cycles), for a percentage and a bar.
        stream: where to write; stderr by default.
        enabled: force on or off; by default on when ``stream`` is a terminal.
        hz: refresh rate limit [1/s].
    """

    def __init__(
        self,
        total: int,
        *,
        stream: TextIO | None = None,
        enabled: bool | None = None,
        hz: float = 10.0,
    ) -> None:
        self.total = max(total, 1)
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self._interval = 1.0 / hz
        self._last = -float("inf")
        self._shown = False
        self._on_line = False  # the status line is on screen (no newline after it yet)
        self._filter = _ClearLine(self)
        self._handlers: list[logging.Handler] = []

    def update(self, done: int, status: str = "") -> None:
        """Show ``done`` of ``total`` and a short ``status`` (throttled)."""
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last < self._interval and done < self.total:
            return
        self._last = now
        fraction = min(done / self.total, 1.0)
        filled = int(fraction * 20)
        bar = "#" * filled + "-" * (20 - filled)
        self.show(f"[{bar}] {fraction * 100:5.1f}% {status}")

    def show(self, line: str) -> None:
        """Redraw the status line as ``line`` now (not throttled): a free-form status line."""
        if not self.enabled:
            return
        if not self._shown:
            self._watch_logging()
        self.stream.write(f"\r{line}\x1b[K")
        self.stream.flush()
        self._shown = self._on_line = True

    def clear_line(self) -> None:
        """Erase the status line (a log record follows); the next update redraws it."""
        if self._on_line:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._on_line = False
            self._last = -float("inf")

    def _watch_logging(self) -> None:
        """Clear the line before log records that go to our stream (they would run into it)."""
        for handler in logging.getLogger().handlers:
            if getattr(handler, "stream", None) is self.stream:
                handler.addFilter(self._filter)
                self._handlers.append(handler)

    def close(self) -> None:
        """End the status line (a newline, if anything was shown)."""
        for handler in self._handlers:
            handler.removeFilter(self._filter)
        self._handlers.clear()
        if self._shown:
            if self._on_line:
                self.stream.write("\n")
                self.stream.flush()
            self._shown = self._on_line = False
