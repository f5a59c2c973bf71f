"""Whether a bench run's host kept the loop's rate: a missed timing threshold is then its own.

On a busy machine the control loop wakes late: cycles are skipped (overruns), the goal
moves further between two writes, and a run misses thresholds that measure the robot
(tracking against the goal written one cycle before, clamps of a step the loop was late
for) for what was the host's lateness. :func:`lateness_note` says so, in one line, so that
a miss is never blamed on the robot when the host was late.
"""

from __future__ import annotations

from collections.abc import Iterable

from hilbot.driver.bench.metrics import BenchReport

#: The host ran late below this fraction of the loop's rate ...
RATE_FRACTION = 0.9
#: ... or with more overruns than this fraction of its cycles.
OVERRUN_FRACTION = 0.05
#: The thresholds a late loop moves.
TIMING_BOUND = frozenset(
    {
        "ee_rms_max",
        "ee_max_max",
        "joint_rms_max",
        "joint_max_max",
        "clamp_events_max",
        "lateness_p99_max",
        "rate_min_fraction",
        "overruns_max",
    }
)


def host_was_late(report: BenchReport) -> bool:
    """Whether the loop fell behind its rate: too slow, or too many overruns."""
    timing = report.timing
    slow = timing.achieved_rate_hz < RATE_FRACTION * timing.rate_hz
    return slow or timing.overruns > OVERRUN_FRACTION * max(report.cycles, 1)


def lateness_note(report: BenchReport, missed: Iterable[str]) -> str | None:
    """One line when missed timing-bound thresholds come from a late host; else None."""
    late = sorted(name for name in missed if name in TIMING_BOUND)
    if not late or not host_was_late(report):
        return None
    timing = report.timing
    return (
        f"{', '.join(late)} missed while this host ran late ({timing.achieved_rate_hz:.1f} of "
        f"{timing.rate_hz:.0f} Hz, {timing.overruns} overruns in {report.cycles} cycles, "
        f"lateness p99 {timing.lateness_p99 * 1e3:.1f} ms): the host's lateness, not the "
        "robot's; rerun on a quieter machine, or with --realtime"
    )
