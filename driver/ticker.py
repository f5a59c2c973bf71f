"""Precise periodic ticks for the control loop.

asyncio's own sleep is coarse on Linux: the epoll selector rounds timeouts up to
whole milliseconds, which at 500 Hz gives 0.5-1.1 ms of lateness. The
:class:`ThreadTicker` instead runs a timer thread that sleeps until ~200 µs before
each deadline, busy-waits the rest (yielding the GIL on every spin), and wakes
the event loop through ``call_soon_threadsafe``. Everything else stays on asyncio.

Deadlines are on a fixed grid ``start + k * period``: a late cycle does not shift
the grid, and ticks that pass while a cycle is still running are skipped and
counted as overruns, never delivered in a burst.

:class:`SteppedTicker` is for tests and simulations on a :class:`ManualClock`:
each tick advances the clock by one period at once, so a simulated minute takes
as long as the computation does.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import NamedTuple, Protocol

SPIN = 200e-6  # [s] busy-wait before each deadline; time.sleep overshoots by ~50-100 µs


class Tick(NamedTuple):
    """One tick: the deadline it was for, when the loop saw it, whether the loop was late."""

    deadline: float  # [s] on the ticker's clock
    woke: float  # [s] when the event loop ran the cycle's wake-up
    skipped: int  # deadlines dropped entirely while the previous cycle was still running
    overrun: bool  # the previous cycle was still running at this deadline


class Ticker(Protocol):
    """A source of periodic ticks for one consumer."""

    period: float

    def start(self) -> None:
        """Start ticking; the first deadline is one period from now."""
        ...

    async def wait(self) -> Tick:
        """Wait for the next deadline."""
        ...

    def stop(self) -> None:
        """Stop ticking; safe to call twice."""
        ...


class ManualClock:
    """A clock that only moves when told to, for deterministic tests and simulations."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = start

    def __call__(self) -> float:
        """The current simulated time [s]."""
        return self.now

    def advance(self, seconds: float) -> None:
        """Move the clock forward by ``seconds``."""
        self.now += seconds


class SteppedTicker:
    """Ticks as fast as the consumer runs, advancing a :class:`ManualClock` by one period each."""

    def __init__(self, period: float, clock: ManualClock) -> None:
        self.period = period
        self._clock = clock
        self._next = 0.0

    def start(self) -> None:
        """Put the first deadline one period ahead."""
        self._next = self._clock() + self.period

    async def wait(self) -> Tick:
        """Advance the clock to the next deadline and yield to other tasks once."""
        await asyncio.sleep(0)
        now = self._clock()
        if now < self._next:
            self._clock.advance(self._next - now)
        deadline = self._next
        self._next += self.period
        return Tick(deadline, self._clock(), 0, False)

    def stop(self) -> None:
        """Nothing to release."""


class ThreadTicker:
    """A timer thread that wakes the event loop at precise deadlines.

    Args:
        period: [s] between deadlines.
        clock: a monotonic clock [s]; must be safe to call from any thread.
        spin: [s] of busy-waiting before each deadline.
    """

    def __init__(
        self,
        period: float,
        clock: Callable[[], float] = time.perf_counter,
        spin: float = SPIN,
    ) -> None:
        if period <= 0:
            raise ValueError(f"period must be positive, got {period}")
        self.period = period
        self._clock = clock
        self._spin = spin
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._waiter: asyncio.Future[Tick] | None = None
        self._pending: float | None = None  # newest deadline nobody waited for yet
        self._skipped = 0

    def start(self) -> None:
        """Start the timer thread; must be called from the event loop's thread."""
        if self._thread is not None:
            raise RuntimeError("ThreadTicker already started")
        self._loop = asyncio.get_running_loop()
        first = self._clock() + self.period
        self._thread = threading.Thread(
            target=self._run, args=(first,), name="hilbot-ticker", daemon=True
        )
        self._thread.start()

    def _run(self, deadline: float) -> None:
        loop = self._loop
        assert loop is not None
        clock, spin, period = self._clock, self._spin, self.period
        while not self._stopping.is_set():
            remaining = deadline - clock() - spin
            if remaining > 0:
                time.sleep(remaining)
            while clock() < deadline:
                time.sleep(0)  # yields the GIL to the loop thread while spinning
            try:
                loop.call_soon_threadsafe(self._fire, deadline)
            except RuntimeError:  # the loop closed under us
                return
            deadline += period
            now = clock()
            if now > deadline:  # this thread was descheduled: skip to the grid point ahead
                deadline += period * ((now - deadline) // period + 1)

    def _fire(self, deadline: float) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            self._waiter = None
            waiter.set_result(Tick(deadline, self._clock(), self._skipped, False))
            self._skipped = 0
            return
        if self._pending is not None:
            self._skipped += 1
        self._pending = deadline

    async def wait(self) -> Tick:
        """Return the next tick; at once if one passed while the caller was busy."""
        if self._pending is not None:
            deadline, self._pending = self._pending, None
            tick = Tick(deadline, self._clock(), self._skipped, True)
            self._skipped = 0
            return tick
        if self._loop is None:
            raise RuntimeError("ThreadTicker.wait() before start()")
        self._waiter = self._loop.create_future()
        return await self._waiter

    def stop(self) -> None:
        """Stop the timer thread and wait for it (at most one period)."""
        self._stopping.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=max(1.0, 2 * self.period))
        if self._waiter is not None and not self._waiter.done():
            self._waiter.cancel()
