"""A live status line for long bench work on a terminal; silent when not a TTY."""

from __future__ import annotations

import sys
import time
from typing import TextIO


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
        self.stream.write(f"\r[{bar}] {fraction * 100:5.1f}% {status}\x1b[K")
        self.stream.flush()
        self._shown = True

    def close(self) -> None:
        """End the status line (a newline, if anything was shown)."""
        if self._shown:
            self.stream.write("\n")
            self.stream.flush()
            self._shown = False
