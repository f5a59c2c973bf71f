"""Unexpected exceptions caught by the control loop: described, and reported once each.

An exception that repeats every cycle (a listener with a bug, a backend that keeps
raising) must not flood the log at the loop rate, yet a *new* problem must still
be seen. :class:`InternalErrors` remembers the distinct problems reported since the
last ``reset`` command, up to a bound, and says which ones are new.
"""

from __future__ import annotations

MAX_DISTINCT = 16  # distinct problems reported between two resets; later ones are counted
MAX_DETAIL = 300  # characters of an exception message kept in a report


def describe(stage: str, err: BaseException) -> str:
    """``"<stage>: <ExceptionType>: <message>"``, the message cut to ``MAX_DETAIL``."""
    message = str(err)
    if len(message) > MAX_DETAIL:
        message = message[:MAX_DETAIL] + "..."
    return (
        f"{stage}: {type(err).__name__}: {message}" if message else f"{stage}: {type(err).__name__}"
    )


class InternalErrors:
    """The distinct internal problems reported since the last clear."""

    def __init__(self, limit: int = MAX_DISTINCT) -> None:
        self.limit = limit
        self._seen: set[str] = set()
        self.suppressed = False  # the limit was reached; later problems are only counted

    def is_new(self, detail: str) -> bool:
        """Whether ``detail`` should be reported (and remember it if so)."""
        if detail in self._seen:
            return False
        if len(self._seen) >= self.limit:
            return False
        self._seen.add(detail)
        return True

    def at_limit(self) -> bool:
        """Whether new problems are no longer reported (say so once: see ``suppressed``)."""
        return len(self._seen) >= self.limit

    def clear(self) -> None:
        """Forget the reported problems (after a ``reset``): each is reported again once."""
        self._seen.clear()
        self.suppressed = False
