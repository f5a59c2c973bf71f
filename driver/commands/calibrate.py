"""Calibrate an arm: check its servos, set offsets in the middle pose, measure ranges, directions.

A guided flow in the terminal: every configured id must answer with its model; the arm
goes to the documented middle pose (homing offsets are set there); each joint is moved
through its full range while a live line shows its min/max; each joint is moved the
positive way to check its direction against the URDF. The result is a YAML file (per
joint offset, direction, measured range) under the user's config folder, which
``hilbot run`` applies; ``--write-servos`` also writes Homing Offset and the position
limits to the servos' EEPROM.

``--backend virtual --demo`` runs it unattended on a virtual bus whose servos were
assembled with known errors (``--mount``), the scripted hand doing what the prompts ask.
The file records that assembly: ``hilbot run`` and ``hilbot lead`` on ``--backend
virtual`` build the virtual arm with it (unless given their own ``--mount``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from hilbot.driver.commands.failures import EXIT_BAD_INPUT, message_of
from hilbot.driver.runtime.backends import HARDWARE, backend_name

#: The assembly errors of ``--demo`` when no ``--mount`` is given, on the arm's second
#: and third servos (a Koch's or SO-101's shoulder and elbow, ids 2 and 3): a horn one
#: spline off, and a servo put in turned around and off. See :func:`demo_mounts`.
DEMO_MOUNTS = ("2:-12", "3:25:reversed")
#: The share of each URDF range the demo hand sweeps (a printed arm stops a little short).
DEMO_RANGE = 0.95


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``hilbot calibrate`` options."""
    parser.add_argument("config", help="robot config: a YAML file or a shipped robot name")
    parser.add_argument(
        "--backend",
        type=backend_name,
        choices=(HARDWARE, "virtual"),
        default=HARDWARE,
        help="hardware: the real bus (default; `dynamixel` is its old name); virtual: a "
        "virtual bus in this process (with --demo)",
    )
    parser.add_argument("--port", help="serial port, overriding the config's")
    parser.add_argument(
        "--demo",
        action="store_true",
        help="--backend virtual: the scripted hand performs the moves the prompts ask for",
    )
    parser.add_argument(
        "--mount",
        action="append",
        default=[],
        metavar="ID:DEG[:reversed]",
        help="--demo: assembly errors of the virtual servos (default: the second servo "
        "12° off, the third 25° off and turned around; for a Koch or SO-101 "
        f"{' '.join(DEMO_MOUNTS)})",
    )
    parser.add_argument("--out", type=Path, metavar="FILE", help="write the calibration here")
    parser.add_argument(
        "--write-servos",
        action="store_true",
        help="also write Homing Offset and Min/Max Position Limit to the servos' EEPROM",
    )
    parser.add_argument("--yes", action="store_true", help="answer confirmations with yes")
    parser.add_argument(
        "--from-lerobot",
        type=Path,
        metavar="FILE",
        help="import LeRobot's calibration JSON of this arm (no guided flow): written as "
        "the arm's hilbot calibration (or to --out)",
    )
    parser.add_argument(
        "--to-lerobot",
        type=Path,
        metavar="FILE",
        help="export the arm's hilbot calibration (or --out's) as LeRobot's calibration JSON",
    )
    parser.add_argument(
        "--accept-ranges",
        action="store_true",
        help="write the calibration even when a measured range reaches past the URDF's "
        "(an arm whose URDF limits are too narrow); refused otherwise",
    )


def demo_mounts(ids: Sequence[int]) -> list[str]:
    """The default ``--mount`` of ``--demo`` on an arm of servos ``ids`` (in config order).

    The second servo 12° off, the third 25° off and turned around: always servos of this
    arm (a fixed list of ids recorded mounts of servos an arm does not have).
    """
    errors = (":-12", ":25:reversed")
    return [f"{servo}{error}" for servo, error in zip(ids[1:], errors, strict=False)]


def _mounts(args: argparse.Namespace, config: Any) -> list[str]:
    """The ``--demo`` arm's assembly: ``--mount``, or :func:`demo_mounts`."""
    return list(args.mount) or demo_mounts([s.id for s in config.servo_specs()])


def _problem(args: argparse.Namespace) -> str | None:
    if args.backend == "virtual" and not args.demo:
        return "--backend virtual needs --demo: nobody can move a virtual arm by hand"
    if args.demo and args.backend != "virtual":
        return "--demo runs on --backend virtual only (the hand moves virtual servos)"
    if args.mount and not args.demo:
        return "--mount sets up the virtual servos of --demo"
    if args.port is not None and args.backend == "virtual":
        return "--port is for --backend hardware"
    if args.accept_ranges and args.demo:
        return "--accept-ranges is for a real arm: the demo hand's ranges are known"
    if args.out is not None and not args.out.parent.is_dir():
        return f"--out {args.out}: the folder {args.out.parent} does not exist"
    return None


def run(args: argparse.Namespace) -> int:
    """Run the guided calibration; returns the exit code."""
    from hilbot.driver.calibration.flow import plan
    from hilbot.driver.runtime.config import load_config
    from hilbot.driver.runtime.errors import DriverError
    from hilbot.hal.errors import HalError

    if args.from_lerobot is not None or args.to_lerobot is not None:
        return _lerobot_file(args)
    problem = _problem(args)
    if problem is not None:
        print(f"hilbot calibrate: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        config = load_config(args.config)
        if len(config.buses) != 1:
            raise DriverError("calibrate handles single-bus robots; this config has several")
        plan(config)
        if args.demo:
            from hilbot.sim.hand import check_mount_ids

            # A bad --mount, before any bus.
            check_mount_ids(args.mount or (), [s.id for s in config.servo_specs()])
    except (DriverError, HalError, ValueError) as exc:
        print(f"hilbot calibrate: {message_of(exc)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        return asyncio.run(_calibrate(args, config))
    except (DriverError, HalError, ValueError) as exc:
        print(f"hilbot calibrate: {message_of(exc)}", file=sys.stderr)
        return 1
    except EOFError:  # Ctrl-D at a prompt, or a stdin that is no terminal and ran out
        print(
            "hilbot calibrate: the input ended at a prompt; no calibration file written",
            file=sys.stderr,
        )
        return 1
    except KeyboardInterrupt:
        print("hilbot calibrate: interrupted; no calibration file written", file=sys.stderr)
        return 130


def _lerobot_problem(args: argparse.Namespace) -> str | None:
    if args.from_lerobot is not None and args.to_lerobot is not None:
        return "--from-lerobot or --to-lerobot, not both"
    for option in ("demo", "mount", "write_servos", "accept_ranges"):
        if getattr(args, option):
            return f"--{option.replace('_', '-')} is for the guided flow, not a LeRobot file"
    if args.port is not None and args.backend == "virtual":
        return "--port is for --backend hardware"
    for path in (args.out, args.to_lerobot):
        if path is not None and not path.parent.is_dir():
            return f"{path}: the folder {path.parent} does not exist"
    return None


def _lerobot_file(args: argparse.Namespace) -> int:
    """``--from-lerobot`` / ``--to-lerobot``: convert a calibration file, no bus opened."""
    from hilbot.driver.calibration import files
    from hilbot.driver.calibration import lerobot as lerobot_files
    from hilbot.driver.calibration.flow import summary
    from hilbot.driver.runtime.config import load_config
    from hilbot.driver.runtime.errors import DriverError

    problem = _lerobot_problem(args)
    if problem is not None:
        print(f"hilbot calibrate: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        config = load_config(args.config)
        if len(config.buses) != 1:
            raise DriverError("calibrate handles single-bus robots; this config has several")
        virtual = args.backend == "virtual"
        port = args.port or config.buses[0].port
        path = args.out or files.default_path(config.name, port, virtual=virtual)
        if args.from_lerobot is not None:
            data = lerobot_files.read_file(args.from_lerobot)
            key = files.port_key(port, virtual=virtual)
            calibration = lerobot_files.from_lerobot(data, config, key, args.from_lerobot)
            calibration, notes = lerobot_files.fit_urdf(calibration, config)
            files.save(calibration, path)
            print(summary(calibration, config))
            for note in notes:
                print(f"Note: {note}")
            print(
                f"LeRobot's calibration {args.from_lerobot} imported to {path}; it takes the "
                "servos to hold its Homing Offsets (LeRobot writes them when it connects); "
                "hilbot run and hilbot lead check it against the arm's first reading"
            )
            return 0
        if not path.is_file():
            raise DriverError(
                f"no hilbot calibration of {config.name} at {path}: run `hilbot calibrate "
                f"{args.config}` first (or name the file with --out)"
            )
        data = lerobot_files.to_lerobot(files.load(path), config)
        lerobot_files.write_file(data, args.to_lerobot)
        print(
            f"{path} exported to {args.to_lerobot}: LeRobot reads it as "
            "calibration/robots/<robot type>/<robot id>.json under its cache folder"
        )
        return 0
    except (DriverError, ValueError) as exc:
        print(f"hilbot calibrate: {message_of(exc)}", file=sys.stderr)
        return EXIT_BAD_INPUT


async def _calibrate(args: argparse.Namespace, config: Any) -> int:
    from hilbot.driver.calibration import files
    from hilbot.driver.calibration.flow import measure, result, summary, write_servos

    bus = config.buses[0]
    port = args.port or bus.port
    key = files.port_key(port, virtual=args.demo)
    path = args.out or files.default_path(config.name, port, virtual=args.demo)
    with _session(args, config, port) as (access, guide):
        swept = guide.ranges if args.demo else None  # where the demo's hand takes each joint
        joints, seen = await measure(config, access, guide, swept=swept)
        await _check_ranges(args, config, result(config, joints, seen, key), swept, guide, path)
        homing = None
        if args.write_servos:
            question = (
                f"Write Homing Offset and Min/Max Position Limit to the EEPROM of "
                f"{len(joints)} servos (torque goes off first)?"
            )
            if not await guide.confirm(question):
                guide.say("Nothing written to the servos; the calibration goes to the file only.")
            else:
                homing = await write_servos(access, joints, seen)
                guide.say("Written and read back.")
        calibration = result(config, joints, seen, key, homing)
        guide.say("\n" + summary(calibration, config))
        mounts = _mounts(args, config) if args.demo else []
        files.save(calibration, path, mounts=mounts)
        guide.say(f"\nCalibration written to {path}\n{_next_hint(args, path, mounts)}")
        guide.close()
    return 0


async def _check_ranges(
    args: argparse.Namespace,
    config: Any,
    calibration: Any,
    swept: Mapping[str, tuple[float, float]] | None,
    guide: Any,
    path: Path,
) -> None:
    """Refuse (or warn about) measured ranges that do not fit the URDF or the hand's sweep.

    Raises:
        CalibrationError: a refused range, nothing written, naming what to do.
    """
    from hilbot.driver.calibration.checks import range_problems, urdf_limits
    from hilbot.driver.calibration.flow import CalibrationError

    problems = range_problems(calibration, urdf_limits(config), swept)
    for problem in problems:
        if not problem.refuse:
            guide.say(f"Warning: {problem.text}")
    refused = [p for p in problems if p.refuse and not (args.accept_ranges and swept is None)]
    if not refused:
        return
    kept = f"; {path} is left as it was" if path.exists() else ""
    if swept is not None:
        fix = (
            "readings missed on a busy host, or a servo at the end of its travel (a --mount "
            "too far off)? Run the command again"
        )
    else:
        fix = (
            "was the arm in its middle pose at step 1? Run the command again; if the arm "
            "really goes that far, add --accept-ranges"
        )
    raise CalibrationError(f"nothing written: {'; '.join(p.text for p in refused)}{kept}: {fix}")


def _next_hint(args: argparse.Namespace, path: Path, mounts: Sequence[str]) -> str:
    """How to run the calibrated arm: the command that applies the file just written."""
    import shlex

    words = ["hilbot", "run", shlex.quote(str(args.config))]
    words += ["--backend", "virtual"] if args.demo else ["--backend", HARDWARE]
    if args.port is not None:
        words += ["--port", shlex.quote(args.port)]
    if args.out is not None:
        words += ["--calibration", shlex.quote(str(path))]
    text = f"{' '.join(words)} applies it"
    if mounts:
        assembly = " ".join(f"--mount {m}" for m in mounts)
        text += f", the virtual arm assembled as calibrated ({assembly}, recorded in the file)"
    return text


@contextlib.contextmanager
def _session(args: argparse.Namespace, config: Any, port: str) -> Iterator[tuple[Any, Any]]:
    from hilbot.driver.calibration.guides import TerminalGuide

    if not args.demo:
        access = _real_access(config, port)
        with access as opened:
            yield opened, TerminalGuide(yes=args.yes)
        return
    with _demo(config, _mounts(args, config)) as pair:
        yield pair


def _real_access(config: Any, port: str) -> contextlib.AbstractContextManager[Any]:
    bus = config.buses[0]
    margin = getattr(bus, "reply_margin_ms", None)  # the config's; unset, the bus's default
    options = {} if margin is None else {"margin_ms": margin}
    return _family(bus).access(port, config.servo_specs(), options)


class _Family(NamedTuple):
    """What calibrate needs of a bus's servo family: its register access, its virtual bus."""

    #: ``(port, servos, {"margin_ms": ...} or {})``: the access, the port closed on exit.
    access: Callable[[str, Sequence[Any], dict[str, float]], contextlib.AbstractContextManager[Any]]
    #: ``(servos, initial positions)``: a virtual bus of the family (``--demo``).
    virtual_bus: Callable[[Sequence[Any], dict[str, float] | None], Any]


def _family(bus: Any) -> _Family:
    """What calibrate uses for ``bus``'s servo family, from :data:`_FAMILIES`.

    Raises:
        DriverError: a family calibrate does not handle.
    """
    from hilbot.driver.runtime.errors import DriverError

    family = getattr(bus, "family", "dynamixel")
    make = _FAMILIES.get(family)
    if make is None:
        raise DriverError(f"calibrating a {family} bus is not supported")
    return make(bus)


def _dynamixel(bus: Any) -> _Family:
    def access(
        port: str, servos: Sequence[Any], options: dict[str, float]
    ) -> contextlib.AbstractContextManager[Any]:
        from hilbot.driver.calibration.dynamixel_access import dynamixel_access

        return dynamixel_access(dataclasses.replace(bus.bus_spec(), port=port), **options)

    def virtual_bus(servos: Sequence[Any], home: dict[str, float] | None) -> Any:
        from hilbot.sim.virtual_bus import running_virtual_bus

        return running_virtual_bus(
            servos,
            protocol=bus.protocol,
            baudrate=bus.baudrate,
            initial_positions=home,
            return_delay_time=0,
        )

    return _Family(access, virtual_bus)


def _feetech(bus: Any) -> _Family:
    def access(
        port: str, servos: Sequence[Any], options: dict[str, float]
    ) -> contextlib.AbstractContextManager[Any]:
        from hilbot.driver.calibration.feetech_access import feetech_access

        models = {s.id: s.model for s in servos}
        return feetech_access(port, bus.baudrate, models, **options)

    def virtual_bus(servos: Sequence[Any], home: dict[str, float] | None) -> Any:
        from hilbot.sim.virtual_bus import running_feetech_bus

        return running_feetech_bus(
            servos, baudrate=bus.baudrate, initial_positions=home, return_delay_time=0
        )

    return _Family(access, virtual_bus)


#: Each servo family's register access and virtual bus, by ``buses[].family``.
_FAMILIES: dict[str, Callable[[Any], _Family]] = {"dynamixel": _dynamixel, "feetech": _feetech}


@contextlib.contextmanager
def _demo(config: Any, mounts: list[str]) -> Iterator[tuple[Any, Any]]:
    from hilbot.driver.calibration.guides import HandGuide
    from hilbot.driver.commands.sim_bus import joint_ranges
    from hilbot.driver.runtime.backends import virtual_margin_ms
    from hilbot.sim.hand import Hand, mounted_servos

    family = _family(config.buses[0])
    servos = mounted_servos(config.servo_specs(), mounts)
    vbus = family.virtual_bus(servos, dict(config.home) or None)
    margin = virtual_margin_ms(config.safety.bus_watchdog)  # the host's stalls, measured now
    with vbus, Hand(vbus, servos) as hand:
        ranges = demo_ranges(joint_ranges(config))
        with family.access(vbus.port, servos, {"margin_ms": margin}) as access:
            yield access, HandGuide(hand, ranges)


def demo_ranges(
    urdf: Mapping[str, tuple[float, float]], share: float = DEMO_RANGE
) -> dict[str, tuple[float, float]]:
    """The ranges the demo hand sweeps: ``share`` of each URDF range, about its middle."""
    out = {}
    for joint, (lower, upper) in urdf.items():
        middle, half = 0.5 * (lower + upper), 0.5 * (upper - lower) * share
        out[joint] = (middle - half, middle + half)
    return out
