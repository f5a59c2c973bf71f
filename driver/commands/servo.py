"""Change one servo's id, baud rate, return delay time or limit registers, safely.

Torque is turned off first (EEPROM is locked while it is on); a new id must be
free on the bus; after each change the servo must answer as itself at its new id
or rate. Change one servo at a time, with only that servo (or distinct ids) on the bus.

Example: hilbot servo --port /dev/ttyUSB0 --id 1 --set-id 5 --set-baud 1000000

Rehearse without hardware: ``hilbot servo ROBOT --backend virtual --id 1 --set-id 5``
changes a servo of a virtual bus of that robot (its bus's baud rate, protocol and family
unless given); the bus, and the change, end with the command.
"""

from __future__ import annotations

import argparse
import sys

from hilbot.driver.commands import virtual_rehearsal as virtual
from hilbot.hal.dynamixel.tools import (
    ChangeError,
    change_baudrate,
    change_id,
    open_bus,
    set_limit,
    set_return_delay,
)
from hilbot.hal.errors import HalError
from hilbot.hal.family import family

#: Limit registers ``hilbot servo`` sets (EEPROM: torque goes off first), in ticks/units.
LIMIT_HELP = {
    "min_position_limit": "Min Position Limit (2.0, address 52) / CW Angle Limit (1.0, 6)",
    "max_position_limit": "Max Position Limit (2.0, address 48) / CCW Angle Limit (1.0, 8)",
    "pwm_limit": "PWM Limit (2.0, address 36)",
    "current_limit": "Current Limit (2.0, address 38)",
}


#: Feetech registers ``hilbot servo --family feetech`` sets (EEPROM, saved behind Lock).
FEETECH_HELP = {
    "min_angle_limit": "Feetech Min Angle Limit (address 9) [steps]",
    "max_angle_limit": "Feetech Max Angle Limit (address 11) [steps]",
    "max_torque": "Feetech Max Torque (address 16) [0.1 %%], loaded into Torque Limit at power-up",
    "homing_offset": "Feetech Homing Offset (address 31) [steps], -2047..2047",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``hilbot servo`` options."""
    parser.add_argument(
        "robot",
        nargs="?",
        help="--backend virtual: the robot whose virtual bus holds the servo (a shipped name "
        f"or a YAML file; default {virtual.DEFAULT_ROBOT})",
    )
    virtual.add_backend_argument(parser)
    parser.add_argument("--port", help="serial device, e.g. /dev/ttyUSB0")
    parser.add_argument("--id", type=int, required=True, help="the servo's current id")
    parser.add_argument("--baud", type=int, help="its current baud rate (default 1000000)")
    parser.add_argument("--protocol", type=int, choices=(1, 2), help="default 2")
    parser.add_argument("--set-id", type=int, metavar="M", help="give it id M (must be free)")
    parser.add_argument("--set-baud", type=int, metavar="B", help="switch it to B bit/s")
    parser.add_argument(
        "--return-delay",
        type=int,
        metavar="N",
        help="Return Delay Time in 2 µs units; 0 answers fastest",
    )
    for option, what in LIMIT_HELP.items():
        parser.add_argument(f"--{option.replace('_', '-')}", type=int, metavar="V", help=what)
    parser.add_argument(
        "--family",
        choices=("dynamixel", "feetech"),
        help="servo family (default dynamixel); feetech writes EEPROM behind its Lock "
        "register (saved)",
    )
    for option, what in FEETECH_HELP.items():
        parser.add_argument(f"--{option.replace('_', '-')}", type=int, metavar="V", help=what)


def run(args: argparse.Namespace) -> int:
    """Apply the requested changes in order (return delay, id, baud rate)."""
    problem = virtual.virtual_problem(args, args.robot)
    if problem is not None:
        print(f"hilbot servo: {problem}", file=sys.stderr)
        return 2
    if args.backend == "virtual":
        return _run_virtual(args)
    if args.port is None:
        print(
            "hilbot servo: give --port, the adapter's serial port (hilbot scan lists them), or "
            "rehearse on a virtual bus: hilbot servo ROBOT --backend virtual --id ...",
            file=sys.stderr,
        )
        return 2
    return change_servo(args)


def _run_virtual(args: argparse.Namespace) -> int:
    """``--backend virtual``: the change on a virtual bus of the robot, ended after."""
    from hilbot.driver.runtime.errors import DriverError

    try:
        config = virtual.load_robot(args.robot)
    except DriverError as exc:
        print(f"hilbot servo: {exc}", file=sys.stderr)
        return 2
    holding = [b for b in config.buses if args.id in {s.id for s in config.servo_specs(b.name)}]
    bus = holding[0] if holding else config.buses[0]
    args.family = args.family or bus.family
    args.baud = args.baud or bus.baudrate
    if args.family == bus.family and family(bus.family).protocols:
        args.protocol = args.protocol or bus.protocol
    args.margin_ms = virtual.virtual_margin(MARGIN_MS)

    def change(ports: dict[str, str]) -> int:
        args.port = ports[bus.name]
        print(virtual.bus_line(config, bus.name, args.port), flush=True)
        return change_servo(args)

    return virtual.on_virtual_buses(config, change)


#: [ms] reply margin of the changes on a real bus (a virtual one's comes from the host).
MARGIN_MS = 10.0


def change_servo(args: argparse.Namespace) -> int:
    """Apply the changes to the servo on ``args.port``; 0 when all took."""
    if args.baud is None:
        args.baud = 1_000_000
    return _CHANGES[args.family or "dynamixel"](args)


def _change_dynamixel(args: argparse.Namespace) -> int:
    if args.protocol is None:
        args.protocol = 2
    limits = {o: getattr(args, o) for o in LIMIT_HELP if getattr(args, o) is not None}
    if args.set_id is None and args.set_baud is None and args.return_delay is None and not limits:
        print(
            "hilbot servo: nothing to do; give --set-id, --set-baud, --return-delay or a limit "
            "(--min-position-limit, --max-position-limit, --pwm-limit, --current-limit)"
        )
        return 2
    servo_id = args.id
    margin = getattr(args, "margin_ms", MARGIN_MS)
    try:
        with open_bus(args.port, args.baud, args.protocol, margin_ms=margin) as bus:
            if args.return_delay is not None:
                spec = set_return_delay(bus, servo_id, args.return_delay)
                print(
                    f"servo {servo_id} ({spec.name}): return delay time {2 * args.return_delay} µs"
                )
            for option, value in limits.items():
                name = set_limit(bus, servo_id, option, value)
                print(f"servo {servo_id}: {name.value} {value}")
            if args.set_id is not None:
                spec = change_id(bus, servo_id, args.set_id)
                print(f"servo {servo_id} ({spec.name}) is now id {args.set_id}")
                servo_id = args.set_id
            if args.set_baud is not None:
                spec = change_baudrate(bus, servo_id, args.set_baud)
                print(f"servo {servo_id} ({spec.name}) now talks at {args.set_baud} bit/s")
    except (HalError, ValueError) as exc:
        feetech = _feetech_at(args.port, args.baud, servo_id, margin) if _missing(exc) else None
        if feetech is not None:
            exc = ChangeError(
                f"servo {servo_id} does not answer as a Dynamixel, but a Feetech {feetech} "
                f"answers at id {servo_id}: add --family feetech",
                servo_id=servo_id,
            )
        print(f"hilbot servo: {exc}", file=sys.stderr)
        return 1
    return 0


def _missing(exc: Exception) -> bool:
    return isinstance(exc, ChangeError) and "does not answer" in str(exc)


def _feetech_at(port: str, baud: int, servo_id: int, margin_ms: float) -> str | None:
    """The model of a Feetech servo answering at ``servo_id`` (not a Dynamixel), if any."""
    from hilbot.driver.commands.scan import feetech_servos

    found = feetech_servos(port, baud, [servo_id], margin_ms)
    return found[0].model if found else None


def _run_feetech(args: argparse.Namespace) -> int:
    from hilbot.hal.feetech import tools

    dynamixel_only = [
        f"--{o.replace('_', '-')}" for o in LIMIT_HELP if getattr(args, o) is not None
    ]
    if dynamixel_only or args.protocol not in (None, 2):
        which = ", ".join(dynamixel_only) or "--protocol"
        print(
            f"hilbot servo: {which} is for Dynamixel servos, not --family feetech", file=sys.stderr
        )
        return 2
    values = {o: getattr(args, o) for o in FEETECH_HELP if getattr(args, o) is not None}
    if args.return_delay is not None:
        values = {"return_delay": args.return_delay, **values}
    if args.set_id is None and args.set_baud is None and not values:
        print(
            "hilbot servo: nothing to do; give --set-id, --set-baud, --return-delay or "
            + ", ".join(f"--{o.replace('_', '-')}" for o in FEETECH_HELP)
        )
        return 2
    servo_id = args.id
    margin = getattr(args, "margin_ms", MARGIN_MS)
    try:
        with tools.open_bus(args.port, args.baud, margin_ms=margin) as bus:
            for option, value in values.items():
                name = tools.set_register(bus, servo_id, option, value)
                print(f"servo {servo_id}: {name.value} {value} (saved)")
            if args.set_id is not None:
                spec = tools.change_id(bus, servo_id, args.set_id)
                print(f"servo {servo_id} ({spec.name}) is now id {args.set_id}")
                servo_id = args.set_id
            if args.set_baud is not None:
                spec = tools.change_baudrate(bus, servo_id, args.set_baud)
                print(f"servo {servo_id} ({spec.name}) now talks at {args.set_baud} bit/s")
    except (HalError, ValueError) as exc:
        print(f"hilbot servo: {exc}", file=sys.stderr)
        return 1
    return 0


#: How ``hilbot servo`` changes a servo of each family.
_CHANGES = {"dynamixel": _change_dynamixel, "feetech": _run_feetech}
