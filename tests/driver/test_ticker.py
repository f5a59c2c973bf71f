"""Ticks: the timer and thread tickers keep their grid and report overruns; stepped is exact."""

from __future__ import annotations

import asyncio
import sys
import time

import numpy as np
import pytest

from hilbot.driver.runtime.stats import StatsRecorder
from hilbot.driver.runtime.ticker import (
    ADAPT_WINDOW,
    TIMER_EARLY_MIN,
    TIMER_SLACK,
    ManualClock,
    SteppedTicker,
    ThreadTicker,
    TimerTicker,
    precise_ticker,
)


async def test_thread_ticker_keeps_the_grid():
    period = 0.002
    ticker = ThreadTicker(period)
    ticker.start()
    try:
        ticks = [await ticker.wait() for _ in range(100)]
    finally:
        ticker.stop()
    deadlines = np.array([t.deadline for t in ticks])
    steps = np.diff(deadlines) / period
    # Deadlines stay on the grid: whole multiples of the period (skips allowed on a busy machine).
    np.testing.assert_allclose(steps, np.round(steps), atol=1e-6)
    assert all(t.woke >= t.deadline for t in ticks)  # never early


async def test_thread_ticker_reports_overruns_instead_of_bursting():
    period = 0.002
    ticker = ThreadTicker(period)
    ticker.start()
    try:
        await ticker.wait()
        time.sleep(5 * period)  # a cycle that blocks the loop for 5 periods
        late = await ticker.wait()
        after = await ticker.wait()
    finally:
        ticker.stop()
    assert late.overrun
    assert late.skipped >= 1
    assert after.deadline - late.deadline == pytest.approx(period, rel=1e-6) or after.overrun


async def test_thread_ticker_stop_is_idempotent():
    ticker = ThreadTicker(0.001)
    ticker.start()
    await ticker.wait()
    ticker.stop()
    ticker.stop()
    with pytest.raises(RuntimeError):
        ticker.start()


def test_thread_ticker_rejects_bad_period():
    with pytest.raises(ValueError, match="period"):
        ThreadTicker(0.0)


async def test_stepped_ticker_advances_the_manual_clock():
    clock = ManualClock(10.0)
    ticker = SteppedTicker(0.01, clock)
    ticker.start()
    first = await ticker.wait()
    second = await ticker.wait()
    assert first.deadline == pytest.approx(10.01)
    assert second.deadline == pytest.approx(10.02)
    assert clock() == pytest.approx(10.02)
    assert not first.overrun


async def test_wait_yields_to_other_tasks():
    clock = ManualClock()
    ticker = SteppedTicker(0.01, clock)
    ticker.start()
    ran = asyncio.Event()

    async def other() -> None:
        ran.set()

    task = asyncio.create_task(other())
    await ticker.wait()
    await task
    assert ran.is_set()


def test_stats_percentiles_and_rate():
    stats = StatsRecorder(target_rate=100.0, window=16)
    for k in range(40):
        stats.record(deadline=k * 0.01, lateness=k * 1e-6, cycle=0.002, bus_io=0.0015, ik=0.0)
    snap = stats.snapshot()
    assert snap.cycles == 40
    assert snap.rate == pytest.approx(100.0)
    # The window holds the last 16 cycles: lateness 24..39 µs.
    assert snap.lateness.max == pytest.approx(39e-6)
    assert snap.lateness.p50 == pytest.approx(31.5e-6)
    assert snap.overhead.p50 == pytest.approx(0.0005)


needs_timerfd = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux timerfd")


@needs_timerfd
async def test_timer_ticker_keeps_the_grid_and_is_never_early():
    period = 0.002
    ticker = TimerTicker(period)
    ticker.start()
    try:
        ticks = [await ticker.wait() for _ in range(100)]
    finally:
        ticker.stop()
    deadlines = np.array([t.deadline for t in ticks])
    steps = np.diff(deadlines) / period
    np.testing.assert_allclose(steps, np.round(steps), atol=1e-6)
    assert all(t.woke >= t.deadline for t in ticks)
    assert all(0.0 <= t.spun <= period / 4 + 0.01 for t in ticks)  # spun within the margin
    # a tick that came late says how many deadlines it dropped
    assert all(t.overrun == (t.skipped > 0) for t in ticks)
    assert sum(t.skipped for t in ticks[1:]) == round(steps.sum()) - len(steps)


@needs_timerfd
async def test_timer_ticker_reports_overruns_instead_of_bursting():
    period = 0.002
    ticker = TimerTicker(period)
    ticker.start()
    try:
        first = await ticker.wait()
        time.sleep(5 * period)  # a cycle that blocks the loop for 5 periods
        late = await ticker.wait()
        after = await ticker.wait()
    finally:
        ticker.stop()
    assert late.overrun and late.skipped >= 4
    assert late.deadline == pytest.approx(first.deadline + (late.skipped + 1) * period)
    assert late.woke - late.deadline < period  # the newest passed deadline, not the oldest
    assert after.deadline - late.deadline == pytest.approx(period, rel=1e-6) or after.overrun


@needs_timerfd
async def test_a_timer_tick_woken_periods_late_is_the_newest_deadline():
    # The loop is held up while the ticker waits (the scheduler, another task): the tick
    # is the newest deadline that passed, with the dropped ones counted, as when the
    # caller itself came back late; never a lateness of several periods.
    period = 0.002
    ticker = TimerTicker(period)
    ticker.start()
    try:
        first = await ticker.wait()
        waiting = asyncio.create_task(ticker.wait())
        await asyncio.sleep(0)  # the wait arms its timer
        time.sleep(6 * period)  # the loop is held up past several deadlines
        late = await waiting
    finally:
        ticker.stop()
    assert late.overrun and late.skipped >= 4
    assert late.deadline == pytest.approx(first.deadline + (late.skipped + 1) * period)
    assert 0.0 <= late.woke - late.deadline < period


@needs_timerfd
async def test_timer_ticker_stop_is_idempotent_and_it_starts_once():
    ticker = TimerTicker(0.001)
    ticker.start()
    await ticker.wait()
    ticker.stop()
    ticker.stop()
    with pytest.raises(RuntimeError):
        ticker.start()
    with pytest.raises(RuntimeError):
        await ticker.wait()


def test_timer_ticker_needs_the_monotonic_clock():
    with pytest.raises(ValueError, match="perf_counter or time"):
        TimerTicker(0.002, clock=ManualClock())
    with pytest.raises(ValueError, match="period"):
        TimerTicker(0.0)


@needs_timerfd
def test_the_timer_margin_follows_the_typical_wake_up_delay_not_a_fixed_cap():
    ticker = TimerTicker(0.002)
    try:
        # most wake-ups 40 µs late, a quarter of them 1.5 ms (the scheduler's doing)
        for k in range(ADAPT_WINDOW):
            ticker._adapt(1.5e-3 if k % 4 == 0 else 40e-6)
        assert ticker.early == pytest.approx(40e-6 + TIMER_SLACK)
        # a host that is slow to wake gets the margin it needs, at most a quarter period
        for _ in range(ADAPT_WINDOW):
            ticker._adapt(300e-6)
        assert ticker.early == pytest.approx(300e-6 + TIMER_SLACK)
        for _ in range(ADAPT_WINDOW):
            ticker._adapt(5e-3)
        assert ticker.early == pytest.approx(0.002 / 4)
        for _ in range(ADAPT_WINDOW):
            ticker._adapt(0.0)
        assert ticker.early == pytest.approx(max(TIMER_SLACK, TIMER_EARLY_MIN))
    finally:
        ticker.stop()


def test_precise_ticker_picks_the_timer_on_linux(monkeypatch):
    expected = TimerTicker if sys.platform.startswith("linux") else ThreadTicker
    ticker = precise_ticker(0.002)
    assert type(ticker) is expected
    ticker.stop()
    assert type(precise_ticker(0.002, clock=lambda: 0.0)) is ThreadTicker
    monkeypatch.setenv("HILBOT_TICKER", "thread")
    assert type(precise_ticker(0.002)) is ThreadTicker
