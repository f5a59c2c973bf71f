"""Check a robot's buses: USB latency timer, servo models, modes, return delay, limits, faults.

Prints each finding and each bus's timing budget: the highest cycle rate the wire
can carry for these servos and registers at this baud rate. Reads only; never
enables torque or writes a register. Exit status 1 when something is wrong.

Examples: hilbot doctor robot.yaml
          hilbot doctor robot.yaml --port /dev/ttyUSB1   (the config's servos on another port)
          hilbot doctor --port /dev/ttyUSB0 --baud 1000000 --servo 1:XM430-W350 --servo 2:XM430-W350
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from hilbot.hal.dynamixel.tools import Level, diagnose
from hilbot.hal.errors import HalError
from hilbot.hal.mapping import BusSpec, ServoSpec


def _servo(text: str) -> tuple[int, str]:
    servo_id, sep, model = text.partition(":")
    if not sep or not servo_id.strip().isdigit() or not model.strip():
        raise argparse.ArgumentTypeError(f"servos look like 1:XM430-W350, got {text!r}")
    return int(servo_id), model.strip()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``hilbot doctor`` options."""
    parser.add_argument("config", nargs="?", help="robot config YAML (or use --port/--servo)")
    parser.add_argument(
        "--port", help="serial device: without a config, or overriding a single-bus config's"
    )
    parser.add_argument("--baud", type=int, help="baud rate, without a config (default 1000000)")
    parser.add_argument("--protocol", type=int, choices=(1, 2), help="without a config (default 2)")
    parser.add_argument(
        "--family", choices=("dynamixel", "feetech"), help="without a config (default dynamixel)"
    )
    parser.add_argument(
        "--servo", type=_servo, action="append", default=[], metavar="ID:MODEL", help="repeat"
    )
    parser.add_argument(
        "--margin-ms", type=float, default=3.0, help="reply deadline slack [ms] (default 3)"
    )


def buses_from_args(args: argparse.Namespace) -> list[tuple[BusSpec, Sequence[ServoSpec]]]:
    """The buses to check: from the config file, or from --port and --servo."""
    if args.config:
        from hilbot.driver.config import load_config

        ignored = [
            f"--{name}" for name in ("baud", "protocol", "servo", "family") if getattr(args, name)
        ]
        if ignored:
            raise ValueError(
                f"{', '.join(ignored)} describe a bus without a config; with a config they "
                "come from its buses and servos (edit it, or drop the config)"
            )
        config = load_config(args.config)
        specs = config.bus_specs()
        if args.port is not None:
            if len(specs) != 1:
                raise ValueError(
                    f"--port needs a single-bus robot; {args.config} has buses "
                    f"{', '.join(specs)}: edit their ports in the config"
                )
            ((name, spec),) = specs.items()
            specs = {name: BusSpec(args.port, spec.baudrate, spec.protocol, spec.family)}
        return [(spec, config.servo_specs(name)) for name, spec in specs.items()]
    if not args.port or not args.servo:
        raise ValueError("give a robot config, or --port and at least one --servo ID:MODEL")
    servos = [ServoSpec(i, model, f"servo{i}") for i, model in args.servo]
    baud = args.baud if args.baud is not None else 1_000_000
    return [(BusSpec(args.port, baud, args.protocol or 2, args.family or "dynamixel"), servos)]


def run(args: argparse.Namespace) -> int:
    """Diagnose every bus; print findings and the timing budget."""
    try:
        buses = buses_from_args(args)
    except (ValueError, HalError) as exc:
        print(f"hilbot doctor: {exc}", file=sys.stderr)
        return 2
    worst = Level.OK
    for spec, servos in buses:
        kind = "Feetech" if spec.family == "feetech" else f"protocol {spec.protocol}.0"
        print(f"== {spec.port}: {spec.baudrate} bit/s, {kind}, {len(servos)} servos")
        if spec.family == "feetech":
            from hilbot.hal.feetech.tools import diagnose as diagnose_feetech

            findings, budget = diagnose_feetech(spec, servos, margin_ms=args.margin_ms)
        else:
            findings, budget = diagnose(spec, servos, margin_ms=args.margin_ms)
        for f in findings:
            print(f"[{f.level.value:>5}] {f.subject}: {f.message}")
            if f.level is Level.ERROR or (f.level is Level.WARN and worst is Level.OK):
                worst = f.level
        if budget:
            print("timing budget:")
            print("  " + budget)
    return 1 if worst is Level.ERROR else 0
