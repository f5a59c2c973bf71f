"""Bench-test a robot config: run a scripted scenario, record every cycle, report with plots.

Runs the scenario's steps (joint sweeps, Cartesian lines and circles, step
responses, recorded teleop, injected faults) on the simulator, the virtual
Dynamixel or Feetech buses or real hardware, and writes into --out: recording.npz
(replay it with ``hilbot replay``), summary.json, joints.png, end_effector.png, lateness.png
and overview.png. Exits 1 when a threshold of the scenario is missed, so the
command can gate a CI job; 2 on bad input; 3 when the run itself failed (e.g. a
bus that does not answer).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from hilbot.driver.commands.failures import (
    add_view_port,
    positive_hz,
    positive_number,
    view_port,
    view_port_problem,
)
from hilbot.driver.runtime.backends import HARDWARE, backend_name, hardware_help

if TYPE_CHECKING:
    from hilbot.driver.bench.compare import BackendComparison
    from hilbot.driver.bench.metrics import ErrorStats
    from hilbot.driver.bench.scenario import Scenario
    from hilbot.driver.runtime.config import RobotConfig

EXIT_MISSED = 1
EXIT_BAD_INPUT = 2
EXIT_FAILED = 3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``hilbot bench`` options."""
    parser.add_argument("config", help="robot config: a YAML file or a shipped robot name")
    parser.add_argument(
        "--scenario",
        required=True,
        metavar="FILE",
        help="scenario YAML, or the name of a shipped one (e.g. openmanipulator_circle)",
    )
    choices = ("sim", "mujoco", "virtual", HARDWARE)
    parser.add_argument(
        "--backend",
        type=backend_name,
        choices=choices,
        default="sim",
        help="sim: in-process simulator (default); mujoco: the simulator's servos driving a "
        "MuJoCo body with the scenario's scene (the mujoco extra); virtual: virtual buses on "
        "pseudo-terminals, driven by the real backends; "
        + hardware_help("the real arm on the config's port (or --port)"),
    )
    parser.add_argument(
        "--view",
        action="store_true",
        help="serve a live 3D view of the run on 127.0.0.1 (the view extra)",
    )
    add_view_port(parser)
    parser.add_argument(
        "--port", help="serial port of the real arm, overriding the config (single-bus robots)"
    )
    parser.add_argument(
        "--compare-backend",
        type=backend_name,
        choices=choices,
        metavar="BACKEND",
        help="run the scenario on this backend too and compare the two runs",
    )
    parser.add_argument(
        "--clock",
        choices=("real", "fake"),
        default="real",
        help="real: wall-clock time (default); fake: simulated time, as fast as the "
        "computation runs and deterministic (sim only; a --compare-backend bus runs in real time)",
    )
    parser.add_argument("--out", type=Path, metavar="DIR", help="output folder")
    parser.add_argument(
        "--duration-scale",
        type=positive_number,
        default=1.0,
        metavar="X",
        help="stretch (>1) or shorten (<1) every timed step",
    )
    parser.add_argument(
        "--rate",
        type=positive_hz,
        metavar="HZ",
        help="loop rate, overriding the scenario and config",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of random injected faults")
    parser.add_argument(
        "--realtime",
        action="store_true",
        help="run the scenario under SCHED_FIFO (Linux, root or CAP_SYS_NICE), as hilbot run "
        "--realtime; the report is computed at normal priority afterwards",
    )
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    parser.add_argument("--quiet", action="store_true", help="no progress line")


def run(args: argparse.Namespace) -> int:
    """Run the bench; 0 passed, 1 thresholds missed, 2 bad input, 3 the run failed."""
    from hilbot.driver.bench.errors import BenchError, RunFailed, ScenarioError, UnsupportedStep
    from hilbot.driver.runtime.errors import DriverError
    from hilbot.hal.errors import HalError, PortError

    problem = _option_problem(args)
    if problem is not None:
        print(f"hilbot bench: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        config, scenario, scenario_file = _load_inputs(args)
    except (DriverError, ValueError) as exc:
        print(f"hilbot bench: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    out = args.out or Path("bench-out") / f"{scenario.name}-{args.backend}"
    leftover = _leftover(args, out)
    if leftover is not None:
        print(f"hilbot bench: {leftover}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        return _bench(args, config, scenario, scenario_file, out)
    except (UnsupportedStep, ScenarioError) as exc:
        print(f"hilbot bench: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except PortError as exc:
        print(
            f"hilbot bench: cannot open the serial port {exc.port}: {_reason(exc)}. Connect the "
            "arm's adapter, or give its port with --port (or in the config's buses); "
            "`hilbot scan --port PORT` checks that the servos answer there",
            file=sys.stderr,
        )
        return EXIT_FAILED
    except RunFailed as exc:
        from hilbot.driver.bench.report import write_outputs
        from hilbot.driver.bench.stream import remove_partial

        write_outputs(exc.recording, scenario.thresholds, out, plots=not args.no_plots)
        remove_partial(args.streaming)  # its cycles are in the recording written
        print(f"hilbot bench: {exc}; the cycles before it are in {out}", file=sys.stderr)
        return EXIT_FAILED
    except (BenchError, DriverError, HalError, OSError) as exc:
        print(f"hilbot bench: the run failed: {exc}{_streamed(args)}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:  # the runtime has already held and disabled torque
        print(f"hilbot bench: interrupted{_streamed(args)}", file=sys.stderr)
        return 130


def _streamed(args: argparse.Namespace) -> str:
    """Where a run that did not end cleanly left its cycles (its partial folder), if anywhere."""
    from hilbot.driver.bench.stream import partial_path

    path = getattr(args, "streaming", None)
    if path is None or not partial_path(path).is_dir():
        return ""
    folder = partial_path(path)
    return f"; the cycles recorded until then are in {folder} (hilbot replay {folder})"


def _leftover(args: argparse.Namespace, out: Path) -> str | None:
    """A refusal when a bench run into ``out`` was cut short and its recording is still there."""
    from hilbot.driver.bench.stream import leftover_problem

    folders = (
        [out / b for b in (args.backend, args.compare_backend)] if args.compare_backend else [out]
    )
    for folder in folders:
        problem = leftover_problem(folder / "recording.npz", "--out")
        if problem is not None:
            return problem
    return None


def _option_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with a combination of options, if anything."""
    view_problem = view_port_problem(args)
    if view_problem is not None:
        return view_problem
    if args.compare_backend is not None and args.compare_backend == args.backend:
        return (
            f"--compare-backend {args.compare_backend} is the --backend already; "
            "compare with another one (e.g. --backend sim --compare-backend virtual)"
        )
    if args.port is not None and HARDWARE not in (args.backend, args.compare_backend):
        return (
            f"--port is for the hardware backend; --backend {args.backend} opens no serial "
            "port of yours (drop --port, or use --backend hardware)"
        )
    if args.clock == "fake" and args.backend not in ("sim", "mujoco"):
        return (
            f"--clock fake works with the sim backend only (and mujoco), not {args.backend} "
            "(a bus runs in real time)"
        )
    return None


def _load_inputs(args: argparse.Namespace) -> tuple[RobotConfig, Scenario, Path]:
    """The config (with --port and the rate applied) and the scenario, checked against it.

    Raises:
        DriverError: a bad config, or a scenario that does not fit the robot.
        ValueError: a bad option value.
    """
    from hilbot.driver.bench.errors import ScenarioError
    from hilbot.driver.bench.scenario import check_names, load_scenario, resolve_scenario
    from hilbot.driver.bench.trace import check_traces
    from hilbot.driver.runtime.config import load_config

    config = load_config(args.config)
    if args.port is not None:
        config = _with_port(config, args.port)
    scenario_file = resolve_scenario(args.scenario)
    scenario = load_scenario(scenario_file)
    rate = args.rate if args.rate is not None else scenario.rate_hz
    if rate is not None:
        if not rate > 0:
            raise ScenarioError(None, [("--rate", f"must be positive, got {rate}")])
        config = config.model_copy(update={"rate_hz": rate})
    if args.duration_scale != 1.0:
        scenario = scenario.scaled(args.duration_scale)
    check_names(scenario, config.joint_names, config.chain_names, path=scenario_file)
    check_traces(scenario, scenario_file.parent, config.chain_names, path=scenario_file)
    return config, scenario, scenario_file


def _with_port(config: RobotConfig, port: str) -> RobotConfig:
    from hilbot.driver.runtime.errors import ConfigError

    if len(config.buses) != 1:
        raise ConfigError(None, ("buses",), "--port needs a single-bus robot; edit the config")
    bus = config.buses[0].model_copy(update={"port": port})
    return config.model_copy(update={"buses": (bus,)})


def _reason(exc: BaseException) -> str:
    """The operating system's reason behind a port error (``No such file or directory``)."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, OSError) and cause.strerror:
            return cause.strerror
        cause = cause.__cause__ or cause.__context__
    return str(exc)


def _bench(
    args: argparse.Namespace,
    config: RobotConfig,
    scenario: Scenario,
    scenario_file: Path,
    out: Path,
) -> int:
    from hilbot.driver.bench.backends import BackendKind, ClockKind
    from hilbot.driver.bench.compare import compare_runs, plot_comparison
    from hilbot.driver.bench.host_lateness import lateness_note
    from hilbot.driver.bench.report import format_summary, write_outputs
    from hilbot.driver.bench.runner import RunOptions, run_bench
    from hilbot.driver.bench.stream import remove_partial

    options = RunOptions(
        base_dir=scenario_file.parent,
        config_path=str(args.config),
        clock=args.clock,
        progress=not args.quiet,
        view_port=view_port(args) if args.view else None,
    )
    backends = [args.backend] + ([args.compare_backend] if args.compare_backend else [])
    recordings, passed = [], True
    for backend in backends:
        clock = ClockKind(args.clock) if backend in ("sim", "mujoco") else ClockKind.REAL
        run_options = replace(options, clock=clock.value)
        folder = out / backend if args.compare_backend else out
        print(f"{scenario.name} on {backend} ({clock.value} clock) -> {folder}")
        args.streaming = folder / "recording.npz"  # streamed to its .partial folder meanwhile
        run_options = replace(run_options, record_to=args.streaming)
        with _realtime(args.realtime):
            recording = asyncio.run(
                run_bench(
                    config, scenario, BackendKind(backend), clock, run_options, seed=args.seed
                )
            )
        outcome = write_outputs(recording, scenario.thresholds, folder, plots=not args.no_plots)
        remove_partial(args.streaming)
        print(format_summary(outcome))
        passed = passed and outcome.passed
        if not outcome.passed:
            names = ", ".join(r.name for r in outcome.missed())
            print(f"hilbot bench: thresholds missed on {backend}: {names}", file=sys.stderr)
            note = lateness_note(outcome.report, (r.name for r in outcome.missed()))
            if note is not None:
                print(f"hilbot bench: {note}", file=sys.stderr)
        recordings.append(recording)
    if len(recordings) == 2:
        comparison = compare_runs(recordings[0], recordings[1])
        (out / "comparison.json").write_text(
            json.dumps(comparison.to_dict(), indent=2, default=str) + "\n", encoding="utf-8"
        )
        if not args.no_plots:
            plot_comparison(recordings[0], recordings[1], out / "comparison.png")
        print(_comparison_line(comparison, out))
    return 0 if passed else EXIT_MISSED


def _comparison_line(comparison: BackendComparison, out: Path) -> str:
    """One line: the worst joint and tool-path differences between the two runs."""

    def worst(stats: list[ErrorStats], scale: float, unit: str) -> str:
        valid = [s for s in stats if s.samples]
        if not valid:
            return "n/a"
        top = max(valid, key=lambda s: s.rms)
        return f"rms {top.rms * scale:.2f} {unit} ({top.name}), max {top.max * scale:.2f} {unit}"

    return (
        f"comparison {comparison.backend_b} minus {comparison.backend_a}, at equal times: "
        f"measured {worst(comparison.measured_diff, 1e3, 'mrad')}; "
        f"commanded {worst(comparison.command_diff, 1e3, 'mrad')}; "
        f"tool path {worst(comparison.ee_diff, 1e3, 'mm')}; wrote {out / 'comparison.json'}"
    )


@contextlib.contextmanager
def _realtime(enabled: bool) -> Iterator[None]:
    """SCHED_FIFO for the duration of the run only (plotting must not starve the machine)."""
    from hilbot.driver.runtime.ticker import enable_realtime

    if not enabled:
        yield
        return
    if not enable_realtime():
        print("hilbot bench: --realtime: SCHED_FIFO not permitted here", file=sys.stderr)
        yield
        return
    try:
        yield
    finally:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
