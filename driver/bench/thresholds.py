"""Check a report against a scenario's thresholds: which limits a run missed."""

from __future__ import annotations

import math
from dataclasses import dataclass

from hilbot.driver.bench.metrics import BenchReport, ErrorStats
from hilbot.driver.bench.scenario import Thresholds


@dataclass(frozen=True)
class ThresholdResult:
    """One checked limit: its name, the limit, the measured value, and whether it passed."""

    name: str
    limit: float | str
    value: float | str
    passed: bool
    detail: str = ""

    def describe(self) -> str:
        """One line for the terminal, e.g. ``ee_rms_max: 0.0071 > 0.005 (chain arm)``."""
        verdict = "ok" if self.passed else "MISSED"
        extra = f" ({self.detail})" if self.detail else ""
        measured = f"measured {_fmt(self.value)}, limit {_fmt(self.limit)}"
        return f"{verdict:6} {self.name}: {measured}{extra}"


def _fmt(value: float | str) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def _worst(stats: list[ErrorStats], attr: str) -> tuple[float, str]:
    values = [(getattr(s, attr), s.name) for s in stats if s.samples]
    if not values:
        return float("nan"), "no samples"
    value, name = max(values)
    return float(value), name


def _upper(name: str, limit: float, value: float, detail: str = "") -> ThresholdResult:
    # A missing measurement (NaN) cannot prove the limit was met.
    passed = not math.isnan(value) and value <= limit
    return ThresholdResult(name, float(limit), float(value), passed, detail)


def _stop_results(report: BenchReport, th: Thresholds) -> list[ThresholdResult]:
    """The controlled stops against their time and distance limits."""
    results: list[ThresholdResult] = []
    stops = report.stops
    if th.stops_min is not None:
        results.append(
            ThresholdResult(
                "stops_min", float(th.stops_min), float(len(stops)), len(stops) >= th.stops_min
            )
        )
    if th.stop_time_max is not None:
        worst = max(stops, key=lambda s: s.duration, default=None)
        value = worst.duration if worst is not None else 0.0
        detail = f"{worst.mode} at {worst.time:.2f} s" if worst is not None else "no stop"
        results.append(_upper("stop_time_max", th.stop_time_max, value, detail))
    if th.stop_distance_max is not None:
        worst = max(stops, key=lambda s: s.distance, default=None)
        value = worst.distance if worst is not None else 0.0
        detail = f"{worst.joint} from {worst.speed:.2f}/s" if worst is not None else "no stop"
        results.append(_upper("stop_distance_max", th.stop_distance_max, value, detail))
    return results


def check_thresholds(report: BenchReport, thresholds: Thresholds) -> list[ThresholdResult]:
    """Return one result per limit the scenario sets (limits left out are not checked)."""
    results: list[ThresholdResult] = []
    th = thresholds
    for name, stats, attr, limit in (
        ("ee_rms_max", report.end_effectors, "rms", th.ee_rms_max),
        ("ee_max_max", report.end_effectors, "max", th.ee_max_max),
        ("joint_rms_max", report.joints, "rms", th.joint_rms_max),
        ("joint_max_max", report.joints, "max", th.joint_max_max),
    ):
        if limit is not None:
            value, where = _worst(stats, attr)
            results.append(_upper(name, limit, value, f"worst: {where}"))
    timing = report.timing
    if th.lateness_p99_max is not None:
        results.append(_upper("lateness_p99_max", th.lateness_p99_max, timing.lateness_p99))
    if th.rate_min_fraction is not None:
        fraction = timing.achieved_rate_hz / timing.rate_hz
        passed = not math.isnan(fraction) and fraction >= th.rate_min_fraction
        results.append(
            ThresholdResult(
                "rate_min_fraction",
                th.rate_min_fraction,
                fraction,
                passed,
                f"{timing.achieved_rate_hz:.1f} of {timing.rate_hz:.1f} Hz",
            )
        )
    counts = (
        ("overruns_max", th.overruns_max, timing.overruns),
        ("clamp_events_max", th.clamp_events_max, report.clamp_events),
        ("faults_max", th.faults_max, len(report.faults)),
    )
    for name, limit_count, count in counts:
        if limit_count is not None:
            results.append(_upper(name, float(limit_count), float(count)))
    if th.faults_min is not None:
        found = len(report.faults)
        results.append(
            ThresholdResult(
                "faults_min", float(th.faults_min), float(found), found >= th.faults_min
            )
        )
    results.extend(_stop_results(report, th))
    for joint, limit in (th.holding_effort_min or {}).items():
        value = report.holding_effort.get(joint, math.nan)
        results.append(
            ThresholdResult(
                f"holding_effort_min[{joint}]",
                limit,
                value,
                not math.isnan(value) and value >= limit,
                "median |effort| over the last 0.5 s armed",
            )
        )
    if th.command_failures_max is not None:
        failures = report.command_failures
        detail = "; ".join(f"{c['command']} at cycle {c['cycle']}: {c['error']}" for c in failures)
        passed = len(failures) <= th.command_failures_max
        results.append(
            ThresholdResult(
                "command_failures_max",
                float(th.command_failures_max),
                float(len(failures)),
                passed,
                detail,
            )
        )
    if th.final_mode is not None:
        results.append(
            ThresholdResult(
                "final_mode", th.final_mode, report.final_mode, report.final_mode == th.final_mode
            )
        )
    return results
