"""Replay a recording on the simulator under a fake clock and report any difference.

Feeds the recorded lifecycle commands, injected faults and targets to a fresh
runtime on the simulator, cycle by cycle, and compares the goal positions it
writes with the recorded ones. Exits 0 when they are identical (within --atol),
1 when they differ, 2 on bad input.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from hilbot.driver.commands.failures import add_view_port, view_port, view_port_problem

EXIT_DIFFERENT = 1
EXIT_BAD_INPUT = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``hilbot replay`` options."""
    parser.add_argument("recording", type=Path, help="a recording (.npz) from bench or run")
    parser.add_argument(
        "--config", help="robot config to replay with (default: the one the recording names)"
    )
    parser.add_argument(
        "--atol",
        type=float,
        default=0.0,
        metavar="RAD",
        help="tolerance on command differences [rad] (default 0: bit-identical)",
    )
    parser.add_argument("--out", type=Path, metavar="DIR", help="write the replay's report here")
    parser.add_argument("--quiet", action="store_true", help="no progress line")
    parser.add_argument(
        "--view",
        action="store_true",
        help="then show the recording in a 3D view on 127.0.0.1 with a time slider, until "
        "Ctrl+C (the view extra)",
    )
    add_view_port(parser)


def run(args: argparse.Namespace) -> int:
    """Replay; 0 identical commands, 1 different, 2 bad input."""
    from hilbot.driver.bench.compare import compare_commands
    from hilbot.driver.bench.recording import Recording
    from hilbot.driver.bench.replay import replay
    from hilbot.driver.runtime.config import load_config
    from hilbot.driver.runtime.errors import DriverError

    if not args.atol >= 0:
        print(f"hilbot replay: --atol must be >= 0, got {args.atol}", file=sys.stderr)
        return EXIT_BAD_INPUT
    view_problem = view_port_problem(args)
    if view_problem is not None:
        print(f"hilbot replay: {view_problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        recording = Recording.load(args.recording)
        source = args.config or recording.header.config_path
        if source is None:
            raise DriverError("the recording names no robot config; pass --config")
        config = load_config(source)
    except (DriverError, ValueError) as exc:
        print(f"hilbot replay: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    _say_if_cut_short(args.recording, recording)
    header = recording.header
    print(
        f"replaying {recording.n_cycles} cycles of {args.recording} "
        f"({header.backend}, {header.clock} clock) on the "
        f"{'MuJoCo body' if header.backend == 'mujoco' else 'simulator'}, fake clock"
    )
    try:
        again = asyncio.run(replay(recording, config, progress=not args.quiet))
    except KeyboardInterrupt:
        print("hilbot replay: interrupted", file=sys.stderr)
        return 130
    diff = compare_commands(recording, again, atol=args.atol)
    code = _report(args, recording, again, diff)
    if args.view:
        try:
            _view(args, recording, config)
        except DriverError as exc:
            print(f"hilbot replay: {exc}", file=sys.stderr)
            return EXIT_BAD_INPUT
    return code


def _say_if_cut_short(path: Path, recording: Any) -> None:
    """One line when the recording is a run's partial one, or a newer partial one sits beside."""
    from hilbot.driver.bench.stream import partial_path

    if recording.cut_short:
        end = float(recording["t"][-1]) if recording.n_cycles else 0.0
        print(f"recording cut short at {end:.1f} s (the run did not end cleanly)")
    elif partial_path(path).is_dir():
        print(
            f"note: {partial_path(path)} holds a later recording to {path} that was cut short "
            f"(hilbot replay {partial_path(path)} reads it)"
        )


def _view(args: argparse.Namespace, recording: Any, config: Any) -> None:
    """``--view``: serve the recording with a time slider until Ctrl+C."""
    import threading

    from hilbot.driver.runtime.validation import load_robot
    from hilbot.driver.view.replay_view import ReplayView
    from hilbot.driver.view.scene import ChainView

    chains = [ChainView(c.name, c.source_link, c.target_link) for c in config.chains]
    view = ReplayView(recording, load_robot(config.urdf), chains, port=view_port(args))
    print(f"view: {view.url} (Ctrl+C ends)", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        view.close()


def _report(args: argparse.Namespace, recording: Any, again: Any, diff: Any) -> int:
    """Print how the replay compares; the exit code."""
    from hilbot.driver.bench.report import format_summary, write_outputs
    from hilbot.driver.bench.scenario import Thresholds

    if args.out is not None:
        print(format_summary(write_outputs(again, Thresholds(), args.out)))
    if diff.identical:
        print(f"commands identical over {diff.cycles_compared} cycles")
        return 0
    length = (
        f"; lengths differ ({recording.n_cycles} recorded, {again.n_cycles} replayed)"
        if diff.length_mismatch
        else ""
    )
    first = ""
    if diff.first_cycle is not None:
        row = diff.first_cycle
        cycle, t = int(recording["cycle"][row]), float(recording["t"][row] - recording["t"][0])
        first = f", first at cycle {cycle} ({t:.3f} s in)"
    one_sided = (
        f"; {diff.written_in_one} of them wrote no command in one run (a failed bus read or "
        f"write: {int(recording['bus_errors'][-1])} bus errors in the recording)"
        if diff.written_in_one
        else ""
    )
    print(
        f"commands differ in {diff.cycles_differing} of {diff.cycles_compared} cycles{first}; "
        f"max |difference| {diff.max_abs:.3g} rad{one_sided}; joints: "
        f"{', '.join(diff.joints_differing) or 'none'}{length}",
        file=sys.stderr,
    )
    if recording.header.backend not in ("sim", "mujoco"):
        header = recording.header
        print(
            f"(a {header.backend} recording: the simulator does not repeat its bus errors, "
            "timing or servo behaviour; --atol RAD ignores small differences)",
            file=sys.stderr,
        )
    return EXIT_DIFFERENT
