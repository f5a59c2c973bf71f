"""Serve a virtual Dynamixel (or Feetech) bus on a pseudo-terminal until stopped.

Each bus of the robot config (or the servos given with --servo) gets a pty that
speaks its family's real protocol (Dynamixel, or Feetech STS/SCS), with each model's
control table and a servo dynamics model behind every id. Open the printed port with
the real backend or the vendor's SDK like a USB adapter. Ctrl+C stops it.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, NamedTuple

from hilbot.driver.commands.failures import positive_seconds
from hilbot.hal.errors import HalError
from hilbot.hal.family import family as hal_family
from hilbot.hal.mapping import ServoSpec
from hilbot.sim.hand import MOTIONS


@dataclass(frozen=True, slots=True)
class _Bus:
    name: str
    servos: Sequence[ServoSpec] | dict[int, str]
    protocol: int
    baudrate: int
    home: dict[str, float]
    ranges: dict[str, tuple[float, float]] | None = None  # URDF limits, for --hand
    family: str = "dynamixel"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``hilbot sim-bus`` options."""
    parser.add_argument(
        "config",
        nargs="?",
        help="robot config: a YAML file or a shipped robot name (or use --servo)",
    )
    parser.add_argument(
        "--servo",
        action="append",
        default=[],
        metavar="ID:MODEL",
        help="a servo to simulate, e.g. 1:XM430-W350 (repeat; replaces the config's servos)",
    )
    parser.add_argument("--bus", help="serve only this bus of a multi-bus config")
    parser.add_argument(
        "--protocol", type=int, choices=(1, 2), help="protocol version (default: config's, or 2)"
    )
    parser.add_argument("--baud", type=int, help="bit rate [bit/s] (default: config's, or 1000000)")
    parser.add_argument(
        "--family",
        choices=("dynamixel", "feetech"),
        help="servo family of the --servo servos (default dynamixel; a config names its own)",
    )
    parser.add_argument(
        "--return-delay",
        type=int,
        metavar="N",
        help="Return Delay Time register of every servo, in 2 µs units (default: factory 250)",
    )
    parser.add_argument(
        "--no-wire-timing",
        action="store_true",
        help="answer at once instead of at the bus's bit rate",
    )
    parser.add_argument(
        "--link", type=Path, help="also make this path a symlink to the pty (one bus only)"
    )
    parser.add_argument(
        "--hand",
        choices=MOTIONS,
        help="a scripted hand moves the torque-off servos: sweep each joint through its "
        "range, wave, or hold still (needs a robot config)",
    )
    parser.add_argument(
        "--mount",
        action="append",
        default=[],
        metavar="ID:DEG[:reversed]",
        help="assemble servo ID this many degrees off (and turned around): an arm that "
        "calibration has something to find on (repeat)",
    )
    parser.add_argument(
        "--duration",
        type=positive_seconds,
        metavar="S",
        help="stop after S seconds instead of waiting",
    )
    parser.add_argument(
        "--physics",
        choices=("none", "mujoco"),
        default="none",
        help="mujoco: the robot's body (gravity, inertia, contact) behind the servos, compiled "
        "from the config's URDF (the mujoco extra; needs a robot config)",
    )
    parser.add_argument(
        "--hand-start",
        default="now",
        metavar="WHEN",
        help="--hand: start moving 'now' (default), at 'open' (when a client first talks "
        "on the port), or after S seconds ('5', or 'open+5': 5 s after the client came)",
    )
    parser.add_argument(
        "--factory-reset",
        action="store_true",
        help="start with every servo factory-fresh: forget the EEPROM kept from earlier runs",
    )
    parser.add_argument(
        "--no-persist",
        action="store_true",
        help="keep no EEPROM across restarts (by default ids, baud rates, offsets and limits "
        "written to the servos are kept in the state folder, per robot and bus)",
    )
    parser.add_argument(
        "--eeprom-file",
        type=Path,
        metavar="FILE",
        help="keep the servos' EEPROM in FILE instead of the state folder (one bus only)",
    )
    parser.add_argument(
        "--plug-in-one-at-a-time",
        action="store_true",
        help="set up a new arm as lerobot-setup-motors does: every servo factory-fresh (id 1, "
        "factory baud) and one on the wire at a time, last first; the next is plugged in "
        "once the host wrote the servo's ID and Baud Rate and searches again, or on Enter",
    )
    parser.add_argument(
        "--log-positions",
        type=Path,
        metavar="FILE",
        help="write to FILE a line per goal-position write ('goal TIME TICKS...') and per "
        "position read ('read TIME TICKS...'): the bus's monotonic clock [s], every servo's "
        "Goal or Present Position (one Feetech bus only)",
    )
    parser.add_argument(
        "--scene",
        type=Path,
        metavar="FILE",
        help="--physics mujoco: a YAML file of objects around the robot (a table, a box)",
    )


def run(args: argparse.Namespace) -> int:
    """Serve until Ctrl+C, SIGTERM or ``--duration``; returns the exit code."""
    from hilbot.driver.runtime.errors import DriverError

    try:
        buses = _buses(args)
    except (DriverError, HalError, ValueError) as exc:
        print(f"hilbot sim-bus: {exc}", file=sys.stderr)
        return 2
    for option, given in (
        ("--link", args.link is not None),
        ("--eeprom-file", args.eeprom_file is not None),
        ("--plug-in-one-at-a-time", args.plug_in_one_at_a_time),
        ("--log-positions", args.log_positions is not None),
    ):
        if given and len(buses) != 1:
            print(f"hilbot sim-bus: {option} needs exactly one bus (use --bus)", file=sys.stderr)
            return 2
    try:
        hand_start = _hand_start(args.hand_start)
        if args.plug_in_one_at_a_time and args.hand:
            raise ValueError(
                "--hand needs the servos at their ids: not with --plug-in-one-at-a-time"
            )
        files = [_eeprom_file(bus, args) for bus in buses]
        with (
            _serving(buses, args, files, hand_start) as served,
            _position_log(args.log_positions, buses, served),
        ):
            for bus, vbus in zip(buses, served, strict=True):
                ids = " ".join(str(i) for i in _ids(bus.servos))
                kind = hal_family(bus.family).describe(bus.protocol).capitalize()
                print(
                    f"{bus.name}: {vbus.port}  ({kind}, {bus.baudrate} bit/s, servos {ids})",
                    flush=True,
                )
            for vbus, path in zip(served, files, strict=True):
                for note in vbus.eeprom_notes:
                    print(f"EEPROM: {note}", flush=True)
                if path is not None:
                    print(f"EEPROM: {path}", flush=True)
            if args.link is not None:
                _link(args.link, served[0].port)
                print(f"{args.link} -> {served[0].port}", flush=True)
            if args.plug_in_one_at_a_time:
                _plug_in(served[0], buses[0])
            _wait(args.duration)
    except (HalError, ValueError) as exc:
        print(f"hilbot sim-bus: {exc}", file=sys.stderr)
        return 2
    finally:
        if args.link is not None and args.link.is_symlink():
            args.link.unlink()
    return 0


def _buses(args: argparse.Namespace) -> list[_Bus]:
    protocol, baud = args.protocol, args.baud
    if args.servo:
        if args.hand or args.mount:
            raise ValueError("--hand and --mount need a robot config (joints and their ranges)")
        servos = dict(_parse_servo(text) for text in args.servo)
        family = args.family or "dynamixel"
        return [_Bus("main", servos, protocol or 2, baud or 1_000_000, {}, family=family)]
    if args.config is None:
        raise ValueError("give a robot config or at least one --servo ID:MODEL")
    from hilbot.driver.runtime.config import load_config
    from hilbot.sim.hand import check_mount_ids, mounted_servos

    config = load_config(args.config)
    chosen = [b for b in config.buses if args.bus in (None, b.name)]
    if not chosen:
        names = ", ".join(b.name for b in config.buses)
        raise ValueError(f"the config has no bus {args.bus!r}; its buses: {names}")
    ids = [s.id for b in chosen for s in config.servo_specs(b.name)]
    check_mount_ids(args.mount or (), ids, "the bus" if len(chosen) == 1 else "the buses")
    return [
        _Bus(
            b.name,
            mounted_servos(config.servo_specs(b.name), args.mount),
            protocol or b.protocol,
            baud or b.baudrate,
            dict(config.home),
            joint_ranges(config),
            family=_family(b.family, args),
        )
        for b in chosen
    ]


def _family(family: str, args: argparse.Namespace) -> str:
    if not hal_family(family).protocols and args.protocol:
        title = hal_family(family).title
        raise ValueError(f"--protocol is for Dynamixel buses, not {title} ones")
    return family


def joint_ranges(config: Any) -> dict[str, tuple[float, float]]:
    """The finite URDF limits of the config's joints: where the hand may move them."""
    from hilbot.driver.runtime.validation import load_robot

    robot = load_robot(config.urdf)
    out = {}
    for joint in config.joint_names:
        lower, upper = robot.joints[joint].bounds()
        if math.isfinite(lower) and math.isfinite(upper):
            out[joint] = (float(lower), float(upper))
    return out


def _parse_servo(text: str) -> tuple[int, str]:
    ident, sep, model = text.partition(":")
    if not sep or not ident.strip().isdigit() or not model.strip():
        raise ValueError(f"--servo {text!r}: expected ID:MODEL, e.g. 1:XM430-W350")
    return int(ident), model.strip()


def _ids(servos: Sequence[ServoSpec] | dict[int, str]) -> list[int]:
    return sorted(servos) if isinstance(servos, dict) else [s.id for s in servos]


@dataclass(frozen=True, slots=True)
class _HandStart:
    on_open: bool  # wait for the first packet from a client
    delay: float  # then (or from now) this many seconds


def _hand_start(text: str) -> _HandStart:
    """``--hand-start``: ``now``, ``open``, ``S`` or ``open+S``."""
    word = text.strip().lower()
    on_open, _, rest = word.partition("+") if word.startswith("open") else ("", "", word)
    if on_open not in ("", "open"):
        on_open, rest = "", word
    if rest in ("", "now"):
        return _HandStart(bool(on_open), 0.0)
    try:
        delay = float(rest)
    except ValueError:
        delay = -1.0
    if not (math.isfinite(delay) and delay >= 0):
        raise ValueError(
            f"--hand-start {text!r}: expected now, open, seconds (e.g. 5) or open+seconds"
        )
    return _HandStart(bool(on_open), delay)


def _eeprom_file(bus: _Bus, args: argparse.Namespace) -> Path | None:
    """Where ``bus`` keeps its EEPROM, or ``None`` (``--no-persist``, or run for a process).

    ``--factory-reset`` removes the file first, so every servo starts factory-fresh.
    """
    from hilbot.driver.runtime.backends import PARENT_ENV
    from hilbot.sim.pty_server import state_dir

    if args.eeprom_file is not None:
        path: Path | None = args.eeprom_file
    elif args.no_persist or os.environ.get(PARENT_ENV):
        # A bus another hilbot process starts for itself is a fresh device every time.
        path = None
    else:
        path = state_dir() / f"{_robot_key(args, bus)}.json"
    if path is not None and args.factory_reset:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    return path


def _robot_key(args: argparse.Namespace, bus: _Bus) -> str:
    """The file name of a bus's EEPROM: the robot (config name or file) and the bus."""
    import hashlib
    import re

    if args.servo:
        servos = bus.servos if isinstance(bus.servos, dict) else {}
        body = "_".join(f"{i}-{m}" for i, m in sorted(servos.items()))
        key = f"servos-{bus.family}-{body}"
    else:
        config = str(args.config)
        path = Path(config)
        if path.suffix.lower() in (".yaml", ".yml") or path.exists():
            digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:8]
            key = f"{path.stem}-{digest}-{bus.name}"
        else:
            key = f"{config}-{bus.name}"
    return re.sub(r"[^A-Za-z0-9._-]+", "_", key)[:150]


@contextlib.contextmanager
def _serving(
    buses: Sequence[_Bus],
    args: argparse.Namespace,
    files: Sequence[Path | None],
    hand_start: _HandStart,
) -> Iterator[list[Any]]:
    from hilbot.sim.hand import hand_on

    with contextlib.ExitStack() as stack:
        served: list[Any] = []
        for bus, path in zip(buses, files, strict=True):
            servos = bus.servos
            vbus = _VIRTUAL_BUSES[bus.family].start(bus, args, path)
            served.append(stack.enter_context(vbus))
            if args.hand is not None and not isinstance(servos, dict):
                begin = vbus.first_packet if hand_start.on_open else None
                hand = hand_on(
                    vbus,
                    servos,
                    args.hand,
                    bus.ranges or {},
                    bus.home,
                    begin=begin,
                    delay=hand_start.delay,
                )
                stack.enter_context(hand)
        yield served


@contextlib.contextmanager
def _position_log(
    path: Path | None, buses: Sequence[_Bus], served: Sequence[Any]
) -> Iterator[None]:
    """``--log-positions``: the bus's goal writes and position reads, a line each."""
    if path is None:
        yield
        return
    if not _VIRTUAL_BUSES[buses[0].family].logs_positions:
        raise ValueError("--log-positions: only a Feetech bus tells goal writes and reads apart")
    vbus = served[0]
    with path.open("w", encoding="utf-8") as log:

        def note(kind: str, now: float, ticks: list[int]) -> None:
            log.write(f"{kind} {now:.6f} {' '.join(map(str, ticks))}\n")

        vbus.on_position = note
        try:
            yield
        finally:
            with vbus.lock:
                vbus.on_position = None


def _plug_in(vbus: Any, bus: _Bus) -> None:
    """Start plugging ``bus``'s servos in one at a time; Enter plugs in the next."""
    from hilbot.sim.pty_server import PlugIn

    if isinstance(bus.servos, dict):
        labels = [f"servo {i}" for i in bus.servos]
    else:
        labels = [f"{s.joint} (servo {s.id})" for s in bus.servos]

    def report(line: str) -> None:
        with contextlib.suppress(OSError):
            print(f"plug-in: {line}", flush=True)

    plug_in = PlugIn(vbus, vbus.servos, labels=labels, report=report)
    plug_in.begin()
    vbus.plug_in = plug_in

    def enter() -> None:
        for _ in sys.stdin:
            plug_in.advance()
            if plug_in.finished.is_set():
                return

    threading.Thread(target=enter, name="plug-in-enter", daemon=True).start()


def _physics(
    args: argparse.Namespace, servos: Sequence[ServoSpec] | dict[int, str], home: dict[str, float]
) -> dict[str, Any]:
    """``--physics mujoco``: the ``model_factory`` that puts the robot's body behind the bus."""
    from hilbot.hal.errors import ConfigError

    if getattr(args, "physics", "none") == "none":
        if getattr(args, "scene", None) is not None:
            raise ConfigError("--scene is for --physics mujoco")
        return {}
    if isinstance(servos, dict) or args.config is None:
        raise ConfigError("--physics mujoco needs a robot config (its URDF), not --servo")
    try:
        from hilbot.sim.mujoco_body import body_model_factory
    except ImportError:
        raise ConfigError(
            "--physics mujoco needs the mujoco package, the mujoco extra: pip install '.[mujoco]' "
            "in the hilbot clone"
        ) from None
    from hilbot.driver.runtime.config import load_config
    from hilbot.driver.runtime.validation import load_robot
    from hilbot.sim.mujoco_scene import load_scene

    robot = load_robot(load_config(args.config).urdf)
    scene = load_scene(args.scene) if args.scene is not None else ()
    return {"model_factory": body_model_factory(robot, servos, scene=scene, home=home)}


def _dynamixel_bus(bus: _Bus, args: argparse.Namespace, eeprom_file: Path | None = None) -> Any:
    """A virtual Dynamixel bus (``hilbot.sim.virtual_bus``) for ``bus``, at its home pose."""
    from hilbot.sim.virtual_bus import running_virtual_bus

    return running_virtual_bus(
        bus.servos,
        protocol=bus.protocol,
        baudrate=bus.baudrate,
        initial_positions=bus.home or None,
        return_delay_time=args.return_delay,
        wire_timing=not args.no_wire_timing,
        eeprom_file=eeprom_file,
        **_physics(args, bus.servos, bus.home),
    )


def _feetech_bus(bus: _Bus, args: argparse.Namespace, eeprom_file: Path | None = None) -> Any:
    """A virtual Feetech bus (``hilbot.sim.virtual_bus``) for ``bus``, at its home pose."""
    from hilbot.hal.feetech.tables import FeetechUnits
    from hilbot.sim.virtual_bus import FeetechVirtualBus

    servos, ticks = bus.servos, {}
    physics = _physics(args, servos, bus.home)
    if not isinstance(servos, dict):
        units = [FeetechUnits.of(s) for s in servos]
        ticks = {
            u.spec.id: u.ticks(bus.home[u.spec.joint]) for u in units if u.spec.joint in bus.home
        }
        servos = {s.id: s.model for s in servos}
    return FeetechVirtualBus(
        servos,
        bus.baudrate,
        return_delay_time=args.return_delay,
        initial_positions=ticks,
        wire_timing=not args.no_wire_timing,
        eeprom_file=eeprom_file,
        **physics,
    )


class _VirtualBus(NamedTuple):
    """A servo family's virtual bus: how to start it, whether ``--log-positions`` works."""

    start: Callable[[_Bus, argparse.Namespace, Path | None], Any]
    logs_positions: bool  # it tells goal writes and position reads apart


#: The virtual bus of each servo family, by ``buses[].family``.
_VIRTUAL_BUSES = {
    "dynamixel": _VirtualBus(_dynamixel_bus, logs_positions=False),
    "feetech": _VirtualBus(_feetech_bus, logs_positions=True),
}


def _link(link: Path, port: str) -> None:
    if link.is_symlink():
        link.unlink()
    os.symlink(port, link)


_PARENT_POLL_S = 0.5


def _wait(duration: float | None) -> None:
    from hilbot.driver.runtime.backends import OWNED_DIR_ENV, PARENT_ENV

    stop = threading.Event()

    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    parent = int(os.environ[PARENT_ENV]) if os.environ.get(PARENT_ENV, "").isdigit() else None
    deadline = None if duration is None else time.monotonic() + duration
    previous = signal.signal(signal.SIGTERM, handler)
    try:
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return
            step = left if parent is None else min(_PARENT_POLL_S, left or _PARENT_POLL_S)
            if stop.wait(step):
                return
            if parent is not None and os.getppid() != parent:
                owned = os.environ.get(OWNED_DIR_ENV)
                if owned and os.path.basename(owned).startswith("hilbot-vbus-"):
                    shutil.rmtree(owned, ignore_errors=True)
                with contextlib.suppress(OSError):  # stderr may be a pipe to the dead parent
                    print("hilbot sim-bus: the process that started it is gone; stopping",
                          file=sys.stderr, flush=True)  # fmt: skip
                return
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
