"""Keeping a virtual bus's server thread on time on a busy host.

Both virtual buses (``hilbot.sim.virtual_bus``, ``hilbot.sim.feetech_bus``) stand in for
hardware that answers at its wire time. Three tools keep their server thread close to
that: :class:`Sleeper` waits for a deadline without spinning long, :class:`GilTuning`
shortens the GIL switch interval while any bus runs, and :func:`raise_priority` nices
the thread up where the host allows it.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable

SERVER_NICE = 5  # how much the server thread raises its priority, where allowed
#: GIL switch interval while a bus runs in this process [s]. A client that busy-polls
#: the port (the stock dynamixel-sdk does) holds the GIL; at Python's default 5 ms the
#: server thread would wake up to 5 ms late for every reply.
SWITCH_INTERVAL = 2e-4


class Sleeper:
    """Waits for deadlines precisely without spinning long.

    ``time.sleep`` wakes up late by a scheduler-dependent amount; the sleeper learns its
    mean and mean deviation (moving averages, as TCP estimates a round-trip time) and
    sleeps that much less, ``mean + 2 x deviation``, then spins the few microseconds
    left. Sleeping only the mean would overshoot the deadline on half the waits; the
    margin makes an overshoot (a reply later than its wire time) rare, for a few tens of
    microseconds of spinning per reply. On an idle Linux box the mean is ~60 µs.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.mean = 1e-4  # [s] how late sleep() returns, on average (initial guess)
        self.deviation = 2e-5  # [s] mean absolute deviation of that lateness

    @property
    def slack(self) -> float:
        """How long before a deadline the sleep ends [s]; spinning covers the rest."""
        return min(self.mean + 2.0 * self.deviation, 2e-3)

    def wait_until(self, deadline: float) -> None:
        """Block until ``clock() >= deadline``."""
        clock = self._clock
        remaining = deadline - clock()
        slack = self.slack
        if remaining > slack:
            target = remaining - slack
            start = clock()
            time.sleep(target)
            late = (clock() - start) - target
            self.deviation = 0.9 * self.deviation + 0.1 * abs(late - self.mean)
            self.mean = min(max(0.9 * self.mean + 0.1 * late, 1e-5), 2e-3)
        while clock() < deadline:
            time.sleep(0.0)


class GilTuning:
    """Shorten the GIL switch interval while any bus runs; restore it after the last."""

    _users = 0
    _saved = 0.0
    _lock = threading.Lock()

    @classmethod
    def acquire(cls) -> None:
        """One more bus runs: shorten the interval if it is the first."""
        with cls._lock:
            if cls._users == 0:
                cls._saved = sys.getswitchinterval()
                sys.setswitchinterval(min(cls._saved, SWITCH_INTERVAL))
            cls._users += 1

    @classmethod
    def release(cls) -> None:
        """One bus stopped: restore the interval if it was the last."""
        with cls._lock:
            cls._users -= 1
            if cls._users == 0:
                sys.setswitchinterval(cls._saved)


def raise_priority() -> None:
    """Nice the calling thread up a little: it stands in for hardware that answers in time.

    Lowering a nice value needs CAP_SYS_NICE (root in CI containers); without it the
    thread keeps the default priority.
    """
    with contextlib.suppress(OSError, AttributeError):
        thread = threading.get_native_id()
        os.setpriority(
            os.PRIO_PROCESS, thread, os.getpriority(os.PRIO_PROCESS, thread) - SERVER_NICE
        )
