"""Bench testing: scripted scenarios, recordings, reports with plots, comparison and replay."""

from hilbot.driver.bench.compare import (
    BackendComparison,
    CommandDiff,
    compare_commands,
    compare_runs,
    plot_comparison,
)
from hilbot.driver.bench.errors import BenchError, RecordingError, ScenarioError, UnsupportedStep
from hilbot.driver.bench.metrics import BenchReport, ErrorStats, TimingStats, build_report
from hilbot.driver.bench.recording import ClampKind, Recording, RecordingHeader
from hilbot.driver.bench.report import BenchOutcome, format_summary, write_outputs
from hilbot.driver.bench.scenario import Scenario, Thresholds, load_scenario, parse_scenario
from hilbot.driver.bench.thresholds import ThresholdResult, check_thresholds

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
