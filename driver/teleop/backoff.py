"""Jittered exponential backoff for reconnecting to the broker."""

from __future__ import annotations

import random


class Backoff:
    """Reconnect delays: doubling from ``minimum`` up to ``maximum``, with jitter.

    Each delay is drawn uniformly from [d/2, d] where d is the current
    un-jittered delay ("equal jitter"), so many robots that lost the same
    broker do not reconnect in lockstep, and none waits less than half the
    nominal delay.

    Args:
        minimum: first delay [s].
        maximum: cap of the un-jittered delay [s].
        rng: random source (seed it in tests).
    """

    def __init__(self, minimum: float, maximum: float, rng: random.Random | None = None) -> None:
        if not 0.0 < minimum <= maximum:
            raise ValueError(f"need 0 < minimum <= maximum, got {minimum} and {maximum}")
        self._minimum = minimum
        self._maximum = maximum
        self._rng = rng if rng is not None else random.Random()
        self._current = minimum
        self.attempts = 0

    def next_delay(self) -> float:
        """Return the next delay [s] and double the nominal one."""
        nominal = self._current
        self._current = min(self._maximum, nominal * 2.0)
        self.attempts += 1
        return nominal / 2.0 + self._rng.uniform(0.0, nominal / 2.0)

    def reset(self) -> None:
        """Start again from ``minimum`` (after a successful connection)."""
        self._current = self._minimum
        self.attempts = 0
