"""Change one servo's id, baud rate or return delay time, safely.

Torque is turned off first (EEPROM is locked while it is on); a new id must be
free on the bus; after each change the servo must answer as itself at its new id
or rate. Change one servo at a time, with only that servo (or distinct ids) on the bus.

Example: hilbot servo --port /dev/ttyUSB0 --id 1 --set-id 5 --set-baud 1000000
"""

from __future__ import annotations

import argparse
import sys

from hilbot.hal.dynamixel.tools import change_baudrate, change_id, open_bus, set_return_delay
from hilbot.hal.errors import HalError


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


def run(args: argparse.Namespace) -> int:
    """Apply the requested changes in order (return delay, id, baud rate)."""
    if args.set_id is None and args.set_baud is None and args.return_delay is None:
        print("hilbot servo: nothing to do; give --set-id, --set-baud or --return-delay")
        return 2
    servo_id = args.id
    try:
        with open_bus(args.port, args.baud, args.protocol, margin_ms=10.0) as bus:
            if args.return_delay is not None:
                spec = set_return_delay(bus, servo_id, args.return_delay)
                print(
                    f"servo {servo_id} ({spec.name}): return delay time {2 * args.return_delay} µs"
                )
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
