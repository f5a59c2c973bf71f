"""Ticks: the thread ticker keeps its grid and reports overruns; the stepped one is exact."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest

from hilbot.driver.stats import StatsRecorder
from hilbot.driver.ticker import ManualClock, SteppedTicker, ThreadTicker


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
