"""Bench testing: scripted scenarios, recordings, reports with plots, comparison and replay.

The names below load their modules on first use: importing one bench module (the errors
``hilbot run`` may report, a recording) does not import the plotting code and matplotlib.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hilbot.driver.bench.compare import (
        BackendComparison,
        CommandDiff,
        compare_commands,
        compare_runs,
        plot_comparison,
    )
    from hilbot.driver.bench.errors import (
        BenchError,
        RecordingError,
        ScenarioError,
        UnsupportedStep,
    )
    from hilbot.driver.bench.metrics import BenchReport, ErrorStats, TimingStats, build_report
    from hilbot.driver.bench.recording import ClampKind, Recording, RecordingHeader
    from hilbot.driver.bench.report import BenchOutcome, format_summary, write_outputs
    from hilbot.driver.bench.scenario import Scenario, Thresholds, load_scenario, parse_scenario
    from hilbot.driver.bench.thresholds import ThresholdResult, check_thresholds

#: public name -> the bench module that defines it
_HOMES = {
    "BackendComparison": "compare",
    "CommandDiff": "compare",
    "compare_commands": "compare",
    "compare_runs": "compare",
    "plot_comparison": "compare",
    "BenchError": "errors",
    "RecordingError": "errors",
    "ScenarioError": "errors",
    "UnsupportedStep": "errors",
    "BenchReport": "metrics",
    "ErrorStats": "metrics",
    "TimingStats": "metrics",
    "build_report": "metrics",
    "ClampKind": "recording",
    "Recording": "recording",
    "RecordingHeader": "recording",
    "BenchOutcome": "report",
    "format_summary": "report",
    "write_outputs": "report",
    "Scenario": "scenario",
    "Thresholds": "scenario",
    "load_scenario": "scenario",
    "parse_scenario": "scenario",
    "ThresholdResult": "thresholds",
    "check_thresholds": "thresholds",
}

__all__ = [
    "BackendComparison",
    "BenchError",
    "BenchOutcome",
    "BenchReport",
    "ClampKind",
    "CommandDiff",
    "ErrorStats",
    "Recording",
    "RecordingError",
    "RecordingHeader",
    "Scenario",
    "ScenarioError",
    "ThresholdResult",
    "Thresholds",
    "TimingStats",
    "UnsupportedStep",
    "build_report",
    "check_thresholds",
    "compare_commands",
    "compare_runs",
    "format_summary",
    "load_scenario",
    "parse_scenario",
    "plot_comparison",
    "write_outputs",
]


def __getattr__(name: str) -> Any:
    """Load a public name's module on first use (PEP 562)."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
