"""Loop statistics: fixed-size windows filled each cycle, summarised on demand.

Recording a cycle writes a few floats into preallocated rings and bumps one histogram
bin per timing (no allocation, no sorting in the hot path). :meth:`StatsRecorder.snapshot`
reads the percentiles off those histograms when someone asks (the status line, the
telemetry at 20 Hz, ``--stats``), in a walk over a few hundred bins, instead of
sorting the whole window of every timing each time.

The bins are 0.1 µs wide up to 204.8 µs and 0.1 % wide above; each percentile is
interpolated between the order statistics as ``numpy.percentile`` does, each order
statistic taken as the mean of the values in its bin: exact when a bin holds equal
values, within the bin's width otherwise. The maximum is exact.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

WINDOW = 4096  # cycles kept for percentiles: 8 s at 500 Hz
#: The stages of a cycle, in the order the runtime reports their times (wall time [s]):
#: reading the joints, deciding the goal (targets, IK, the motion layer), the safety layer,
#: writing the goal, the cycle listeners, the ticker's busy wait before the deadline.
#: ``other`` is the rest of the process's CPU time per cycle (telemetry, the status line,
#: the event loop, other threads, the garbage collector), from ``overhead``.
STAGES = ("read", "motion", "safety", "write", "listeners", "wait")

_LINEAR = 2048  # bins 0.1 µs wide below this many tenths of a µs
_SUB = 1024  # bins per octave above
_MAX_UNITS = (1 << 41) - 1  # [0.1 µs]: about 61 hours
_BINS = _LINEAR + (_MAX_UNITS.bit_length() - 11) * _SUB
_BLOCK = 32  # bins per coarse count (the percentile walk skips whole blocks)


def _bin(value: float) -> int:
    """The histogram bin of ``value`` [s]; negative and NaN values fall in the first."""
    units = int(value * 1e7) if value > 0.0 else 0
    if units < _LINEAR:
        return units
    if units > _MAX_UNITS:
        units = _MAX_UNITS
    shift = units.bit_length() - 11
    return _LINEAR + (shift - 1) * _SUB + (units >> shift) - _SUB


@dataclass(frozen=True, slots=True)
class Percentiles:
    """Median, 99th percentile and maximum of a window [s]."""

    p50: float = 0.0
    p99: float = 0.0
    max: float = 0.0

    @staticmethod
    def of(values: Sequence[float] | np.ndarray) -> Percentiles:
        """Summarise ``values`` exactly; zeros when empty."""
        array = np.asarray(values, dtype=np.float64)
        if array.size == 0:
            return Percentiles()
        p50, p99 = np.percentile(array, (50.0, 99.0))
        return Percentiles(float(p50), float(p99), float(array.max()))


class _Ring:
    __slots__ = ("_data", "_n")

    def __init__(self, size: int) -> None:
        self._data = np.zeros(size, dtype=np.float64)
        self._n = 0

    def push(self, value: float) -> None:
        self._data[self._n % self._data.size] = value
        self._n += 1

    def last(self) -> float:
        return float(self._data[(self._n - 1) % self._data.size]) if self._n else 0.0

    def oldest(self) -> float:
        if self._n <= self._data.size:
            return float(self._data[0])
        return float(self._data[self._n % self._data.size])

    def __len__(self) -> int:
        return min(self._n, self._data.size)


class _Window:
    """The last ``size`` values of one timing, with a histogram kept up to date per push."""

    __slots__ = ("_blocks", "_counts", "_data", "_n", "_size", "_sums")

    def __init__(self, size: int) -> None:
        self._size = size
        self._data = np.zeros(size, dtype=np.float64)
        self._n = 0
        self._counts = [0] * _BINS
        self._sums = [0.0] * _BINS
        self._blocks = [0] * (_BINS // _BLOCK)

    def push(self, value: float) -> None:
        i = self._n % self._size
        counts, sums, blocks = self._counts, self._sums, self._blocks
        if self._n >= self._size:
            old = self._data.item(i)
            b = _bin(old)
            counts[b] -= 1
            blocks[b // _BLOCK] -= 1
            sums[b] = sums[b] - old if counts[b] else 0.0
        self._data[i] = value
        self._n += 1
        b = _bin(value)
        counts[b] += 1
        blocks[b // _BLOCK] += 1
        sums[b] += value

    def __len__(self) -> int:
        return min(self._n, self._size)

    def percentiles(self) -> Percentiles:
        """p50, p99 (as ``numpy.percentile`` interpolates them) and the exact maximum."""
        n = len(self)
        if n == 0:
            return Percentiles()
        wanted: list[int] = []
        for p in (0.5, 0.99):
            rank = p * (n - 1)
            low = math.floor(rank)
            wanted += [low, min(low + 1, n - 1)]
        found = self._order_statistics(sorted(set(wanted)))
        out = []
        for p in (0.5, 0.99):
            rank = p * (n - 1)
            low = math.floor(rank)
            x0, x1 = found[low], found[min(low + 1, n - 1)]
            out.append(x0 + (x1 - x0) * (rank - low))
        return Percentiles(out[0], out[1], float(self._data[:n].max()))

    def _order_statistics(self, ranks: list[int]) -> dict[int, float]:
        """{k: the k-th smallest value (0-based), as the mean of its bin} for sorted ranks."""
        counts, sums, blocks = self._counts, self._sums, self._blocks
        found: dict[int, float] = {}
        below = 0  # values in the bins before the current one
        block = 0
        for rank in ranks:
            while below + blocks[block] <= rank:  # skip whole blocks
                below += blocks[block]
                block += 1
            b = block * _BLOCK
            while below + counts[b] <= rank:
                below += counts[b]
                b += 1
            found[rank] = sums[b] / counts[b]
            # the next rank searches from this block again
            below -= sum(counts[block * _BLOCK : b])
        return found


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
        overhead: the CPU time the whole process spent per cycle [s]: every thread
            (the bus's, the ticker's), the busy wait, telemetry, the garbage collector;
            not only the cycle's own sections.
        ik_time: time spent in IK solvers per cycle [s].
        stages: the mean time per cycle [s] of each stage in ``STAGES`` (wall time),
            and ``other``: the rest of ``overhead`` (telemetry, the event loop, other
            threads; 0 where waits on the bus make the stages longer than the CPU time).
        cpu_share: the share of one core the process used over the window (``overhead``
            per second of loop time).
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
    stages: Mapping[str, float] = field(default_factory=dict)
    cpu_share: float = 0.0
    bus_errors: int = 0
    ik_failures: int = 0
    watchdog_trips: int = 0
    glitches: int = 0
    clamps: int = 0
    internal_errors: int = 0


class StatsRecorder:
    """Collects per-cycle timings; the runtime owns one."""

    def __init__(self, target_rate: float, window: int = WINDOW) -> None:
        self.target_rate = target_rate
        self._deadline = _Ring(window)
        self._lateness = _Window(window)
        self._cycle = _Window(window)
        self._overhead = _Window(window)
        self._ik = _Window(window)
        # the stages' times per cycle (a ring) and their running sums over it, with the
        # process's CPU time per cycle as the last column; re-added once per lap (no drift)
        self._stages = np.zeros((window, len(STAGES) + 1), dtype=np.float64)
        self._stage_sums = [0.0] * (len(STAGES) + 1)
        self._timed = 0  # cycles recorded with stages and CPU time
        self.cycles = 0
        self.overruns = 0
        self.bus_errors = 0
        self.ik_failures = 0
        self.watchdog_trips = 0
        self.glitches = 0
        self.clamps = 0
        self.internal_errors = 0

    def record(
        self,
        deadline: float,
        lateness: float,
        cycle: float,
        bus_io: float,
        ik: float,
        *,
        cpu: float | None = None,
        stages: Sequence[float] | None = None,
    ) -> None:
        """Record one finished cycle (times in [s]).

        ``cpu`` is the process's CPU time per cycle (the overhead); without it the
        overhead is the cycle time minus the bus I/O. ``stages``: the times of
        ``STAGES``, in that order.
        """
        self.cycles += 1
        self._deadline.push(deadline)
        self._lateness.push(lateness)
        self._cycle.push(cycle)
        self._overhead.push(cycle - bus_io if cpu is None else cpu)
        self._ik.push(ik)
        if cpu is not None and stages is not None:
            self._push_stages(stages, cpu)

    def _push_stages(self, stages: Sequence[float], cpu: float) -> None:
        ring, sums = self._stages, self._stage_sums
        i = self._timed % len(ring)
        row = [*stages, cpu]
        if self._timed >= len(ring):
            old = ring[i].tolist()
            for k, value in enumerate(row):
                sums[k] += value - old[k]
        else:
            for k, value in enumerate(row):
                sums[k] += value
        ring[i] = row
        self._timed += 1
        if i == len(ring) - 1:  # a lap: the exact sums again
            self._stage_sums = ring.sum(axis=0).tolist()

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

    def stage_means(self) -> dict[str, float]:
        """{stage: mean time per cycle [s]} over the window, ``other`` included."""
        n = min(self._timed, len(self._stages))
        if n == 0:
            return {}
        *means, cpu = (total / n for total in self._stage_sums)
        out = dict(zip(STAGES, means, strict=True))
        out["other"] = max(cpu - sum(means), 0.0)
        return out

    def cpu_per_cycle(self) -> float:
        """The process's mean CPU time per cycle over the window [s] (0: not measured)."""
        n = min(self._timed, len(self._stages))
        return self._stage_sums[-1] / n if n else 0.0

    def snapshot(self) -> LoopStats:
        """Summarise the window (reads the histograms; no sorting)."""
        rate = self.achieved_rate()
        return LoopStats(
            target_rate=self.target_rate,
            rate=rate,
            cycles=self.cycles,
            overruns=self.overruns,
            lateness=self._lateness.percentiles(),
            cycle_time=self._cycle.percentiles(),
            overhead=self._overhead.percentiles(),
            ik_time=self._ik.percentiles(),
            stages=self.stage_means(),
            cpu_share=self.cpu_per_cycle() * rate,
            bus_errors=self.bus_errors,
            ik_failures=self.ik_failures,
            watchdog_trips=self.watchdog_trips,
            glitches=self.glitches,
            clamps=self.clamps,
            internal_errors=self.internal_errors,
        )
