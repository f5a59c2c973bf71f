"""Loop statistics: fixed-size ring buffers filled each cycle, summarised on demand.

Recording a cycle writes a few floats into preallocated arrays (no allocation in
the hot path); :meth:`StatsRecorder.snapshot` computes percentiles over the most
recent window when someone asks (the status line, telemetry, the benchmark).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

WINDOW = 4096  # cycles kept for percentiles: 8 s at 500 Hz


@dataclass(frozen=True, slots=True)
class Percentiles:
    """Median, 99th percentile and maximum of a window [s]."""

    p50: float = 0.0
    p99: float = 0.0
    max: float = 0.0

    @staticmethod
    def of(values: NDArray[np.float64]) -> Percentiles:
        """Summarise ``values``; zeros when empty."""
        if values.size == 0:
            return Percentiles()
        p50, p99 = np.percentile(values, (50.0, 99.0))
        return Percentiles(float(p50), float(p99), float(values.max()))


@dataclass(frozen=True, slots=True)
class LoopStats:
    """A snapshot of the control loop's timing and error counts.

    Attributes:
        target_rate: configured rate [Hz].
        rate: achieved rate over the window [Hz].
        cycles: cycles run since start.
        overruns: ticks missed because a cycle ran past the next deadline.
        lateness: wake-up time minus deadline [s].
        cycle_time: whole cycle, bus I/O included [s].
        overhead: cycle time minus bus I/O (read and write) [s].
        ik_time: time spent in IK solvers per cycle [s].
        bus_errors: cycles whose read or write failed.
        ik_failures: solves that raised (unreachable, no solution); a solve that is
            only slowed by the max-delta bound is not a failure.
        watchdog_trips: times a stale target stream made the robot hold.
        glitches: readings refused as glitches (a joint moved faster than it can).
        clamps: safety clamps applied since start.
        internal_errors: unexpected exceptions the loop caught (each one faulted the
            robot into its safe state; see ``docs/runtime.md``).
    """

    target_rate: float = 0.0
    rate: float = 0.0
    cycles: int = 0
    overruns: int = 0
    lateness: Percentiles = Percentiles()
    cycle_time: Percentiles = Percentiles()
    overhead: Percentiles = Percentiles()
    ik_time: Percentiles = Percentiles()
    bus_errors: int = 0
    ik_failures: int = 0
    watchdog_trips: int = 0
    glitches: int = 0
    clamps: int = 0
    internal_errors: int = 0


class _Ring:
    __slots__ = ("_data", "_n")

    def __init__(self, size: int) -> None:
        self._data = np.zeros(size, dtype=np.float64)
        self._n = 0

    def push(self, value: float) -> None:
        self._data[self._n % self._data.size] = value
        self._n += 1

    def values(self) -> NDArray[np.float64]:
        return self._data[: min(self._n, self._data.size)].copy()

    def last(self) -> float:
        return float(self._data[(self._n - 1) % self._data.size]) if self._n else 0.0

    def oldest(self) -> float:
        if self._n <= self._data.size:
            return float(self._data[0])
        return float(self._data[self._n % self._data.size])

    def __len__(self) -> int:
        return min(self._n, self._data.size)


class StatsRecorder:
    """Collects per-cycle timings; the runtime owns one."""

    def __init__(self, target_rate: float, window: int = WINDOW) -> None:
        self.target_rate = target_rate
        self._deadline = _Ring(window)
        self._lateness = _Ring(window)
        self._cycle = _Ring(window)
        self._overhead = _Ring(window)
        self._ik = _Ring(window)
        self.cycles = 0
        self.overruns = 0
        self.bus_errors = 0
        self.ik_failures = 0
        self.watchdog_trips = 0
        self.glitches = 0
        self.clamps = 0
        self.internal_errors = 0

    def record(
        self, deadline: float, lateness: float, cycle: float, bus_io: float, ik: float
    ) -> None:
        """Record one finished cycle (times in [s])."""
        self.cycles += 1
        self._deadline.push(deadline)
        self._lateness.push(lateness)
        self._cycle.push(cycle)
        self._overhead.push(cycle - bus_io)
        self._ik.push(ik)

    def count_unrecorded(self) -> None:
        """Count a cycle that an internal error ended before it could be recorded.

        The cycle count is what ``Runtime.wait_cycles`` waits on: it must move on
        every tick, whatever happened in the cycle.
        """
        self.cycles += 1

    def achieved_rate(self) -> float:
        """Cycles per second over the window, from the deadlines the cycles ran at."""
        n = len(self._deadline)
        if n < 2:
            return 0.0
        span = self._deadline.last() - self._deadline.oldest()
        return (n - 1) / span if span > 0 else 0.0

    def snapshot(self) -> LoopStats:
        """Summarise the window (allocates; call it at telemetry rate, not per cycle)."""
        return LoopStats(
            target_rate=self.target_rate,
            rate=self.achieved_rate(),
            cycles=self.cycles,
            overruns=self.overruns,
            lateness=Percentiles.of(self._lateness.values()),
            cycle_time=Percentiles.of(self._cycle.values()),
            overhead=Percentiles.of(self._overhead.values()),
            ik_time=Percentiles.of(self._ik.values()),
            bus_errors=self.bus_errors,
            ik_failures=self.ik_failures,
            watchdog_trips=self.watchdog_trips,
            glitches=self.glitches,
            clamps=self.clamps,
            internal_errors=self.internal_errors,
        )
