"""Write a bench run's outputs: recording, ``summary.json``, PNG plots, and a text summary."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hilbot.driver.bench.metrics import BenchReport, build_report
from hilbot.driver.bench.plots import plot_all
from hilbot.driver.bench.recording import Recording
from hilbot.driver.bench.scenario import Thresholds
from hilbot.driver.bench.thresholds import ThresholdResult, check_thresholds


@dataclass(frozen=True)
class BenchOutcome:
    """A finished, reported run: what was written and whether it passed."""

    report: BenchReport
    thresholds: list[ThresholdResult]
    files: dict[str, Path] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """True when every threshold was met (or none was set)."""
        return all(r.passed for r in self.thresholds)

    def missed(self) -> list[ThresholdResult]:
        """The thresholds that were not met."""
        return [r for r in self.thresholds if not r.passed]


def _finite(value: Any) -> Any:
    """Replace NaN and inf (not valid JSON) by ``None``, recursively."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def summary_document(
    recording: Recording, report: BenchReport, results: list[ThresholdResult]
) -> dict[str, Any]:
    """The ``summary.json`` document: run metadata, report and threshold results."""
    header = recording.header
    scenario = header.scenario or {}
    document: dict[str, Any] = _finite(
        {
            "scenario": scenario.get("name"),
            "backend": header.backend,
            "config": header.config_path,
            "clock": header.clock,
            "versions": header.versions,
            "passed": all(r.passed for r in results),
            "thresholds": [asdict(r) for r in results],
            "report": report.to_dict(),
        }
    )
    return document


def write_outputs(
    recording: Recording, thresholds: Thresholds, out_dir: Path, *, plots: bool = True
) -> BenchOutcome:
    """Save the recording, the summary and the plots into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    report = build_report(recording)
    results = check_thresholds(report, thresholds)
    files = {"recording": recording.save(out_dir / "recording.npz")}
    summary = out_dir / "summary.json"
    summary.write_text(
        json.dumps(summary_document(recording, report, results), indent=2) + "\n", encoding="utf-8"
    )
    files["summary"] = summary
    if plots:
        for path in plot_all(recording, out_dir):
            files[path.stem] = path
    return BenchOutcome(report=report, thresholds=results, files=files)


def _mm(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value * 1e3:.2f} mm"


def _mrad(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value * 1e3:.1f} mrad"


def format_summary(outcome: BenchOutcome) -> str:
    """A short human-readable summary for the terminal."""
    r = outcome.report
    tm = r.timing
    lines = [
        f"{r.cycles} cycles, {r.duration:.2f} s; rate {tm.achieved_rate_hz:.1f}/{tm.rate_hz:g} Hz, "
        f"lateness p50 {tm.lateness_p50 * 1e6:.1f} µs p99 {tm.lateness_p99 * 1e6:.1f} µs, "
        f"overruns {tm.overruns}",
    ]
    for s in r.end_effectors:
        lines.append(f"  end effector {s.name}: rms {_mm(s.rms)}, max {_mm(s.max)}")
    for stop in r.stops:
        lines.append(
            f"  stop ({stop.mode}) at {stop.time:.2f} s: {stop.duration * 1e3:.0f} ms, "
            f"{stop.joint} travelled {stop.distance:.4f} from {stop.speed:.2f}/s"
        )
    joints = ", ".join(f"{s.name} {_mrad(s.rms)}" for s in r.joints)
    lines.append(f"  joint tracking rms: {joints}")
    if r.holding_effort:
        held = ", ".join(f"{j} {v:.3f}" for j, v in r.holding_effort.items())
        lines.append(f"  holding effort (A or %, last 0.5 s armed): {held}")
    lines.append(
        f"  clamp events {r.clamp_events}, hardware faults {len(r.faults)}, "
        f"bus errors {r.bus_errors}, final mode {r.final_mode}"
    )
    lines.extend("  " + result.describe() for result in outcome.thresholds)
    lines.extend(f"  wrote {path}" for path in outcome.files.values())
    return "\n".join(lines)
