"""Bench recorder and replay costs: what recording every cycle adds to the control loop.

Run: python benchmarks/bench_recorder.py [--seconds S] [--no-report]

The OpenManipulator-X config on the simulator under a fake clock runs the shipped
circle scenario (IK every cycle). Measured in the same run:

1. the recorder's cost per cycle (its listener call, timed around it) next to the
   whole loop iteration (wall time between two cycles, IK included);
2. finishing the recording (trim + vectorised FK of every measured pose) and saving
   it (compressed .npz): time and bytes per cycle;
3. replay: the recording run again on a fresh runtime, cycles per second, next to
   the original run's cycles per second.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import load_note, write_section

from hilbot.driver.bench.backends import BackendKind, ClockKind
from hilbot.driver.bench.compare import compare_commands
from hilbot.driver.bench.recorder import Recorder
from hilbot.driver.bench.replay import replay
from hilbot.driver.bench.runner import RunOptions, run_bench
from hilbot.driver.bench.scenario import load_scenario
from hilbot.driver.runtime.config import load_config


def _timed_recorder() -> tuple[list[float], list[float]]:
    """Wrap Recorder.__call__ to time it, and time the gaps between cycles."""
    listener_times: list[float] = []
    cycle_starts: list[float] = []
    original = Recorder.__call__

    def timed(self: Recorder, rec: object) -> None:
        t0 = time.perf_counter()
        original(self, rec)  # type: ignore[arg-type]
        t1 = time.perf_counter()
        listener_times.append(t1 - t0)
        cycle_starts.append(t0)

    Recorder.__call__ = timed  # type: ignore[method-assign]
    return listener_times, cycle_starts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=10.8, help="scenario length [s]")
    parser.add_argument("--no-report", action="store_true")
    args = parser.parse_args()
    load = os.getloadavg()[0]

    config = load_config("openmanipulator_x")
    scenario = load_scenario("openmanipulator_circle")
    scenario = scenario.scaled(args.seconds / scenario.duration())
    original_call = Recorder.__call__
    listener, starts = _timed_recorder()
    t0 = time.perf_counter()
    recording = asyncio.run(
        run_bench(
            config,
            scenario,
            BackendKind.SIM,
            ClockKind.FAKE,
            RunOptions(clock="fake", progress=False),
        )
    )
    run_time = time.perf_counter() - t0
    Recorder.__call__ = original_call  # type: ignore[method-assign]
    n = recording.n_cycles
    per_cycle = np.diff(np.array(starts))
    listener_us = np.array(listener) * 1e6

    # finish() is measured on a copy of the buffers: re-run FK over the recording.
    from hilbot.driver.bench.recorder import fill_ee_measured

    class _Runtime:
        def __init__(self) -> None:
            from hilbot.driver.runtime.validation import load_robot

            self.config = config
            self.robot = load_robot(config.urdf)

    runtime_like = _Runtime()
    t0 = time.perf_counter()
    fill_ee_measured(recording, runtime_like)  # type: ignore[arg-type]
    fk_time = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        path = recording.save(Path(tmp) / "r.npz")
        save_time = time.perf_counter() - t0
        size = path.stat().st_size
    t0 = time.perf_counter()
    again = asyncio.run(replay(recording, config, progress=False))
    replay_time = time.perf_counter() - t0
    identical = compare_commands(recording, again).identical

    rows = [
        ("cycles recorded", f"{n}"),
        (
            "loop iteration, wall time between cycles (median / p99)",
            f"{np.median(per_cycle) * 1e6:.0f} µs / {np.percentile(per_cycle, 99) * 1e6:.0f} µs",
        ),
        (
            "recorder listener per cycle (median / p99)",
            f"{statistics.median(listener_us):.1f} µs / {np.percentile(listener_us, 99):.1f} µs",
        ),
        (
            "recorder share of a loop iteration (median ratio)",
            f"{np.median(listener_us) / (np.median(per_cycle) * 1e6) * 100:.1f} %",
        ),
        ("FK of every measured pose at finish", f"{fk_time / n * 1e6:.1f} µs per cycle"),
        ("save (compressed .npz)", f"{save_time * 1e3:.0f} ms, {size / n:.0f} bytes per cycle"),
        ("original run (fake clock)", f"{n / run_time:.0f} cycles/s"),
        (
            "replay (fake clock)",
            f"{again.n_cycles / replay_time:.0f} cycles/s, identical: {identical}",
        ),
    ]
    body = (
        "OpenManipulator-X on the simulator under a fake clock, shipped `openmanipulator_circle` "
        f"scenario ({args.seconds:g} s at {config.rate_hz:g} Hz, DLS IK every cycle). "
        f"{load_note(load, os.getloadavg()[0])}\n\n"
        "| measure | value |\n|---|---|\n" + "\n".join(f"| {k} | {v} |" for k, v in rows) + "\n"
    )
    print(body)
    if not args.no_report:
        write_section("bench", "Bench recorder and replay", body)


if __name__ == "__main__":
    main()
