"""Precise periodic ticks for the control loop.

asyncio's own sleep is coarse on Linux: the epoll selector rounds timeouts up to
whole milliseconds, which at 500 Hz gives 0.5-1.1 ms of lateness. The
:class:`ThreadTicker` instead runs a timer thread that sleeps until shortly before
each deadline and wakes the event loop through ``call_soon_threadsafe``; the loop
then busy-waits the last stretch itself, so neither the thread's sleep overshoot
nor the loop's wake-up latency shows as lateness. Everything else stays on asyncio.

Deadlines are on a fixed grid ``start + k * period``: a late cycle does not shift
the grid, and ticks that pass while a cycle is still running are skipped and
counted as overruns, never delivered in a burst.

On Linux the :class:`TimerTicker` does without the thread: a ``timerfd`` armed at an
absolute deadline on ``CLOCK_MONOTONIC`` (the kernel's high-resolution timer, not a
sleep that overshoots) makes the event loop's own ``epoll`` wait return; no second
thread wakes, takes the GIL and writes to the loop's self-pipe each cycle. Its busy-wait
margin adapts to the wake-up delay three quarters of the recent cycles stay within (a
rarer, longer delay is the scheduler's doing, which spinning does not buy back) and is at
most a quarter period. :func:`precise_ticker` picks it where it works.

On a loaded machine the scheduler, not Python, dominates lateness; :func:`enable_realtime`
puts the process under ``SCHED_FIFO`` where that is permitted (``hilbot run --realtime``),
where the timer's wake-ups are precise to a few microseconds and the margin shrinks to match.

:class:`SteppedTicker` is for tests and simulations on a :class:`ManualClock`:
each tick advances the clock by one period at once, so a simulated minute takes
as long as the computation does.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import gc
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

EARLY = 250e-6  # [s] the thread wakes the loop this long before a deadline; the loop spins the rest
# time.sleep overshoots by 50-100 µs and waking the loop through its self-pipe costs another
# 20-100 µs on a busy machine (more after a long idle): the margin adapts to the measured
# wake-up delay (its 99th percentile over the last ADAPT_WINDOW ticks, plus EARLY_SLACK).
EARLY_MIN = 100e-6  # [s]
# Spinning longer than this buys nothing: a wake-up that late is the scheduler's doing, and on
# a saturated machine every spun microsecond is taken from the cycles themselves.
EARLY_MAX = 500e-6  # [s], and at most a quarter period
EARLY_SLACK = 100e-6  # [s]
ADAPT_WINDOW = 128  # ticks
# TimerTicker: the margin is the wake-up delay this share of the last ADAPT_WINDOW ticks
# stayed within, plus TIMER_SLACK, within [TIMER_EARLY_MIN, a quarter period].
TIMER_QUANTILE = 0.5
TIMER_SLACK = 50e-6  # [s]
TIMER_EARLY_MIN = 20e-6  # [s]


def enable_realtime(priority: int = 50) -> bool:
    """Run this process (and the threads it starts later) under ``SCHED_FIFO`` at ``priority``.

    Returns whether it worked (it needs root or ``CAP_SYS_NICE`` and Linux).
    """
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    except (AttributeError, OSError, PermissionError):
        return False
    return True


def _adapted_margin(
    delays: list[float], quantile: float, slack: float, low: float, high: float
) -> float:
    """The busy-wait margin after a window of wake-up ``delays`` [s].

    Their ``quantile`` plus ``slack``, within ``[low, high]`` (``high`` wins).
    """
    typical = sorted(delays)[int(quantile * len(delays)) - 1]
    return min(max(typical + slack, low), high)


class Tick(NamedTuple):
    """One tick: the deadline it was for, when the loop saw it, whether the loop was late."""

    deadline: float  # [s] on the ticker's clock
    woke: float  # [s] when the event loop ran the cycle's wake-up
    skipped: int  # deadlines dropped entirely while the previous cycle was still running
    overrun: bool  # deadlines were missed entirely (skipped > 0) since the previous tick
    spun: float = 0.0  # [s] the busy wait before the deadline (CPU time the wait cost)


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


class ScheduledTicker:
    """Ticks at given deadlines on a :class:`ManualClock`, then one period apart.

    A replay runs the loop at the deadlines the original run had, skipped ticks
    included, so everything timed by deadlines (the motion layer) sees the same time.

    Args:
        period: [s] between deadlines once ``deadlines`` are used up (and before them).
        clock: the manual clock to advance.
        deadlines: {cycle number: deadline [s]} of the original run.
    """

    def __init__(self, period: float, clock: ManualClock, deadlines: dict[int, float]) -> None:
        self.period = period
        self._clock = clock
        self._deadlines = deadlines
        self._cycle = 0
        self._next = 0.0

    def start(self) -> None:
        """Put the first deadline one period ahead (or where the original had it)."""
        self._next = self._clock() + self.period

    async def wait(self) -> Tick:
        """Advance the clock to the next deadline and yield to other tasks once."""
        await asyncio.sleep(0)
        self._cycle += 1
        deadline = self._deadlines.get(self._cycle, self._next)
        deadline = max(deadline, self._clock())
        self._clock.advance(deadline - self._clock())
        self._next = deadline + self.period
        return Tick(deadline, self._clock(), 0, False)

    def stop(self) -> None:
        """Nothing to release."""


class ThreadTicker:
    """A timer thread that wakes the event loop at precise deadlines.

    Args:
        period: [s] between deadlines.
        clock: a monotonic clock [s]; must be safe to call from any thread.
        early: [s] the thread wakes the loop before each deadline; the loop busy-waits
            the rest (0 disables the busy wait).
    """

    def __init__(
        self,
        period: float,
        clock: Callable[[], float] = time.perf_counter,
        early: float = EARLY,
    ) -> None:
        if period <= 0:
            raise ValueError(f"period must be positive, got {period}")
        self.period = period
        self._clock = clock
        self._early = min(early, EARLY_MAX, period / 4)
        self._adaptive = early > 0
        self._delays = [0.0] * ADAPT_WINDOW  # [s] thread wake target -> loop callback
        self._n_delays = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._waiter: asyncio.Future[tuple[float, float, int]] | None = None
        # Written by the thread, read by the loop: (index, deadline, wake time) of the newest
        # deadline. One callback is in flight at most (``_posted``), so a blocked loop finds
        # one tick, the newest, when it comes back, not a queue of stale ones.
        self._latest: tuple[int, float, float] = (-1, 0.0, 0.0)
        self._posted = False
        self._seen = -1  # index of the newest deadline the loop has taken
        # (deadline, wake, skipped) of a tick nobody waited for yet
        self._pending: tuple[float, float, int] | None = None

    def start(self) -> None:
        """Start the timer thread; must be called from the event loop's thread."""
        if self._thread is not None or self._stopping.is_set():
            raise RuntimeError("a ThreadTicker can be started once")
        self._loop = asyncio.get_running_loop()
        first = self._clock() + self.period
        self._thread = threading.Thread(
            target=self._run, args=(first,), name="hilbot-ticker", daemon=True
        )
        self._thread.start()

    def _run(self, deadline: float) -> None:
        loop = self._loop
        assert loop is not None
        clock, period = self._clock, self.period
        index = 0
        while not self._stopping.is_set():
            wake = deadline - self._early
            remaining = wake - clock()
            if remaining > 0:
                time.sleep(remaining)
            self._latest = (index, deadline, wake)
            if not self._posted:
                self._posted = True
                try:
                    loop.call_soon_threadsafe(self._collect)
                except RuntimeError:  # the loop closed under us
                    return
            index += 1
            deadline += period
            late = clock() - deadline
            if late > 0:  # this thread was descheduled: skip to the grid point ahead
                n = int(late // period) + 1
                index += n
                deadline += n * period

    def _collect(self) -> None:
        """On the loop: take the newest deadline, hand it to a waiter or keep it pending."""
        self._posted = False
        index, deadline, wake = self._latest
        if index <= self._seen:
            return
        skipped = index - self._seen - 1 if self._seen >= 0 else 0
        self._seen = index
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            self._waiter = None
            waiter.set_result((deadline, wake, skipped))
            return
        if self._pending is not None:
            skipped += self._pending[2] + 1
        self._pending = (deadline, wake, skipped)

    async def wait(self) -> Tick:
        """Return the next tick at its deadline (at once if it passed while the caller was busy).

        The busy wait runs here, in the waiting task, after the event loop has handed it
        the tick: the loop's own hop from the thread's wake-up to this task (a select
        call, the task switch) falls inside the early margin instead of after the deadline.
        """
        if self._loop is None:
            raise RuntimeError("ThreadTicker.wait() before start()")
        self._collect()
        if self._pending is not None:
            (deadline, wake, skipped), self._pending = self._pending, None
        else:
            self._waiter = self._loop.create_future()
            deadline, wake, skipped = await self._waiter
            if self._adaptive:
                self._adapt(self._clock() - wake)
        start = self._clock()
        woke = self._spin_until(deadline)
        return Tick(deadline, woke, skipped, skipped > 0, woke - start if start < deadline else 0.0)

    @property
    def early(self) -> float:
        """The current wake-up margin before each deadline [s]."""
        return self._early

    def _adapt(self, delay: float) -> None:
        self._delays[self._n_delays] = delay
        self._n_delays += 1
        if self._n_delays == ADAPT_WINDOW:
            self._n_delays = 0
            high = min(EARLY_MAX, self.period / 4)
            self._early = _adapted_margin(self._delays, 0.99, EARLY_SLACK, EARLY_MIN, high)

    def _spin_until(self, deadline: float) -> float:
        # Busy-wait in the waiting task: at most ``early`` seconds, and only when on time.
        clock = self._clock
        now = clock()
        while now < deadline:
            now = clock()
        return now

    def stop(self) -> None:
        """Stop the timer thread and wait for it (at most one period)."""
        self._stopping.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=max(1.0, 2 * self.period))
        if self._waiter is not None and not self._waiter.done():
            self._waiter.cancel()


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


_CLOCK_MONOTONIC = 1
_TFD_NONBLOCK = os.O_NONBLOCK
_TFD_CLOEXEC = os.O_CLOEXEC
_TFD_TIMER_ABSTIME = 1


class _TimerFd:
    """A non-blocking Linux timerfd on ``CLOCK_MONOTONIC``, armed at absolute times.

    ``os.timerfd_*`` where Python has them (3.13+), libc through ctypes before.
    """

    def __init__(self) -> None:
        self._libc: Any = None
        if hasattr(os, "timerfd_create"):
            self.fd = os.timerfd_create(  # type: ignore[attr-defined,unused-ignore]
                _CLOCK_MONOTONIC, flags=_TFD_NONBLOCK | _TFD_CLOEXEC
            )
            return
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        fd = libc.timerfd_create(_CLOCK_MONOTONIC, _TFD_NONBLOCK | _TFD_CLOEXEC)
        if fd < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"timerfd_create: {os.strerror(err)}")
        self.fd = int(fd)
        self._libc = libc
        self._spec = _Itimerspec()
        self._spec_ref = ctypes.byref(self._spec)

    def arm(self, when: float) -> None:
        """Fire once at ``when`` [s, on CLOCK_MONOTONIC: time.monotonic / time.perf_counter]."""
        seconds = int(when)
        nanoseconds = min(max(int((when - seconds) * 1e9), 0), 999_999_999)
        if self._libc is None:
            os.timerfd_settime_ns(  # type: ignore[attr-defined,unused-ignore]
                self.fd, flags=_TFD_TIMER_ABSTIME, initial=seconds * 1_000_000_000 + nanoseconds
            )
            return
        value = self._spec.it_value
        value.tv_sec, value.tv_nsec = seconds, nanoseconds
        if self._libc.timerfd_settime(self.fd, _TFD_TIMER_ABSTIME, self._spec_ref, None) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"timerfd_settime: {os.strerror(err)}")

    def drain(self) -> None:
        """Read the expiry count, if any (the fd is readable until then)."""
        with contextlib.suppress(BlockingIOError, InterruptedError):
            os.read(self.fd, 8)

    def close(self) -> None:
        os.close(self.fd)


def _monotonic_clock(clock: Callable[[], float]) -> bool:
    """Whether ``clock`` reads CLOCK_MONOTONIC (the timerfd's clock) on this system."""
    if clock is time.monotonic:
        return True
    if clock is time.perf_counter:
        info = time.get_clock_info("perf_counter")
        return info.implementation == "clock_gettime(CLOCK_MONOTONIC)"
    return False


class TimerTicker:
    """A Linux timerfd that wakes the event loop itself shortly before each deadline.

    The loop then busy-waits the rest in the waiting task, as :class:`ThreadTicker`
    does, but with no thread in between. The margin adapts to the delay from the
    timer's expiry to the waiting task running: the ``TIMER_QUANTILE`` quantile of the
    last ``ADAPT_WINDOW`` delays plus ``TIMER_SLACK``, at least ``TIMER_EARLY_MIN`` and
    at most a quarter period.

    Args:
        period: [s] between deadlines.
        clock: ``time.perf_counter`` or ``time.monotonic`` (the timer's clock).
        early: [s] the first margin; 0 disables the busy wait (and the adaptation).

    Raises:
        OSError: no timerfd here (not Linux); use :func:`precise_ticker`.
    """

    def __init__(
        self,
        period: float,
        clock: Callable[[], float] = time.perf_counter,
        early: float = EARLY,
    ) -> None:
        if period <= 0:
            raise ValueError(f"period must be positive, got {period}")
        if not _monotonic_clock(clock):
            raise ValueError("a TimerTicker runs on time.perf_counter or time.monotonic")
        self.period = period
        self._clock = clock
        self._early = min(early, period / 4)
        self._adaptive = early > 0
        self._delays = [0.0] * ADAPT_WINDOW  # [s] timer expiry -> the waiting task runs
        self._n_delays = 0
        self._timer: _TimerFd | None = _TimerFd()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._next = 0.0
        self._started = False

    def start(self) -> None:
        """Put the first deadline one period ahead; must be called on the event loop."""
        if self._started or self._timer is None:
            raise RuntimeError("a TimerTicker can be started once")
        self._started = True
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self._timer.fd, self._fired)
        self._next = self._clock() + self.period

    def _fired(self) -> None:
        timer = self._timer
        if timer is None:
            return
        timer.drain()
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            self._waiter = None
            waiter.set_result(None)

    async def wait(self) -> Tick:
        """Return the next tick at its deadline (at once if it passed while the caller was busy)."""
        loop, timer = self._loop, self._timer
        if loop is None or timer is None:
            raise RuntimeError("TimerTicker.wait() before start() or after stop()")
        clock, period = self._clock, self.period
        deadline = self._next
        now = clock()
        if now >= deadline:  # passed while the caller was busy: the newest one, at once
            skipped = int((now - deadline) // period)
            deadline += skipped * period
            self._next = deadline + period
            return Tick(deadline, now, skipped, skipped > 0)
        self._next = deadline + period
        wake = deadline - self._early
        if wake > now:
            waiter = loop.create_future()
            self._waiter = waiter
            timer.arm(wake)
            try:
                await waiter
            finally:
                self._waiter = None
            start = clock()
            if self._adaptive:
                self._adapt(start - wake)
            if start - deadline >= period:  # woken periods late: the newest deadline, as above
                skipped = int((start - deadline) // period)
                deadline += skipped * period
                self._next = deadline + period
                return Tick(deadline, start, skipped, True)
        else:
            start = now
        while True:  # the busy wait, in the waiting task
            now = clock()
            if now >= deadline:
                break
        return Tick(deadline, now, 0, False, now - start if start < deadline else 0.0)

    @property
    def early(self) -> float:
        """The current wake-up margin before each deadline [s]."""
        return self._early

    def _adapt(self, delay: float) -> None:
        self._delays[self._n_delays] = delay
        self._n_delays += 1
        if self._n_delays == ADAPT_WINDOW:
            self._n_delays = 0
            self._early = _adapted_margin(
                self._delays, TIMER_QUANTILE, TIMER_SLACK, TIMER_EARLY_MIN, self.period / 4
            )

    def stop(self) -> None:
        """Stop the timer and release it; safe to call twice."""
        timer, self._timer = self._timer, None
        if timer is None:
            return
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(timer.fd)
        timer.close()
        if self._waiter is not None and not self._waiter.done():
            self._waiter.cancel()


def precise_ticker(period: float, clock: Callable[[], float] = time.perf_counter) -> Ticker:
    """The most precise real-time ticker here: a :class:`TimerTicker` on Linux, else a thread.

    ``HILBOT_TICKER=thread`` forces the :class:`ThreadTicker` (to compare the two).
    """
    if (
        sys.platform.startswith("linux")
        and os.environ.get("HILBOT_TICKER", "") != "thread"
        and _monotonic_clock(clock)
    ):
        try:
            return TimerTicker(period, clock)
        except OSError:
            pass
    return ThreadTicker(period, clock)


# --- Garbage collection in the control loop's idle time, not in the middle of a cycle.
#: [s] least time left before the next deadline for a collection in the idle time.
MIN_IDLE = 400e-6
#: collect even without idle time once gen-0 allocations pass this many thresholds.
FORCE_FACTOR = 8


class GcPacer:
    """Takes over automatic garbage collection while a control loop runs."""

    _users = 0
    _was_enabled = True
    _lock = threading.Lock()

    def __init__(self) -> None:
        self._active = False
        self.collections = [0, 0, 0]  # per generation, run by this pacer

    def start(self) -> None:
        """Collect, freeze the survivors, and switch automatic collection off."""
        if self._active:
            return
        with GcPacer._lock:
            if GcPacer._users == 0:
                GcPacer._was_enabled = gc.isenabled()
                gc.collect()
                gc.freeze()
                gc.disable()
            GcPacer._users += 1
        self._active = True

    def stop(self) -> None:
        """Give the heap back to CPython's collector (the last user unfreezes it)."""
        if not self._active:
            return
        self._active = False
        with GcPacer._lock:
            GcPacer._users -= 1
            if GcPacer._users == 0:
                gc.unfreeze()
                if GcPacer._was_enabled:
                    gc.enable()

    def idle(self, time_left: float) -> int:
        """Run a due collection if ``time_left`` [s] before the next deadline allows.

        Returns the generation collected, or -1 when none ran.
        """
        if not self._active:
            return -1
        count0, count1, count2 = gc.get_count()
        t0, t1, t2 = gc.get_threshold()
        if t0 <= 0 or count0 < t0:
            return -1
        if time_left < MIN_IDLE and count0 < FORCE_FACTOR * t0:
            return -1
        generation = 2 if count2 >= t2 else 1 if count1 >= t1 else 0
        gc.collect(generation)
        self.collections[generation] += 1
        return generation
