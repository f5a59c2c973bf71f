"""Change one servo's id, baud rate, return delay time or limit registers, safely.

Torque is turned off first (EEPROM is locked while it is on); a new id must be
free on the bus; after each change the servo must answer as itself at its new id
or rate. Change one servo at a time, with only that servo (or distinct ids) on the bus.

Example: hilbot servo --port /dev/ttyUSB0 --id 1 --set-id 5 --set-baud 1000000
"""

from __future__ import annotations

import argparse
import sys

from hilbot.hal.dynamixel.tools import (
    change_baudrate,
    change_id,
    open_bus,
    set_limit,
    set_return_delay,
)
from hilbot.hal.errors import HalError

#: Limit registers ``hilbot servo`` sets (EEPROM: torque goes off first), in ticks/units.
LIMIT_HELP = {
    "min_position_limit": "Min Position Limit (2.0, address 52) / CW Angle Limit (1.0, 6)",
    "max_position_limit": "Max Position Limit (2.0, address 48) / CCW Angle Limit (1.0, 8)",
    "pwm_limit": "PWM Limit (2.0, address 36)",
    "current_limit": "Current Limit (2.0, address 38)",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``hilbot servo`` options."""
    parser.add_argument("--port", required=True, help="serial device, e.g. /dev/ttyUSB0")
    parser.add_argument("--id", type=int, required=True, help="the servo's current id")
    parser.add_argument("--baud", type=int, default=1_000_000, help="its current baud rate")
    parser.add_argument("--protocol", type=int, choices=(1, 2), default=2)
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


def run(args: argparse.Namespace) -> int:
    """Apply the requested changes in order (return delay, id, baud rate)."""
    limits = {o: getattr(args, o) for o in LIMIT_HELP if getattr(args, o) is not None}
    if args.set_id is None and args.set_baud is None and args.return_delay is None and not limits:
        print(
            "hilbot servo: nothing to do; give --set-id, --set-baud, --return-delay or a limit "
            "(--min-position-limit, --max-position-limit, --pwm-limit, --current-limit)"
        )
        return 2
    servo_id = args.id
    try:
        with open_bus(args.port, args.baud, args.protocol, margin_ms=10.0) as bus:
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
        print(f"hilbot servo: {exc}", file=sys.stderr)
        return 1
    return 0
