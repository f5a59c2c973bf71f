"""Check a robot's buses: USB latency timer, servo models, modes, return delay, limits, faults.

Prints each finding and each bus's timing budget: the highest cycle rate the wire
can carry for these servos and registers at this baud rate. Reads only; never
enables torque or writes a register. Exit status 1 when something is wrong.

Examples: hilbot doctor robot.yaml
          hilbot doctor robot.yaml --port /dev/ttyUSB1   (the config's servos on another port)
          hilbot doctor --port /dev/ttyUSB0 --baud 1000000 --servo 1:XM430-W350 --servo 2:XM430-W350
          hilbot doctor so101_follower --backend virtual  (a virtual bus of it, ended after)
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from collections.abc import Sequence

from hilbot.driver.commands import virtual_rehearsal as virtual
from hilbot.driver.runtime.backends import ROUND_TRIP_WAKEUPS, VIRTUAL_MARGIN_MS, StallMonitor
from hilbot.hal.dynamixel.tools import Finding, Level
from hilbot.hal.errors import HalError
from hilbot.hal.family import family
from hilbot.hal.mapping import BusSpec, ServoSpec


def _servo(text: str) -> tuple[int, str]:
    servo_id, sep, model = text.partition(":")
    if not sep or not servo_id.strip().isdigit() or not model.strip():
        raise argparse.ArgumentTypeError(f"servos look like 1:XM430-W350, got {text!r}")
    return int(servo_id), model.strip()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``hilbot doctor`` options."""
    parser.add_argument(
        "config",
        nargs="?",
        help="robot config: a YAML file or a shipped robot name (or use --port/--servo)",
    )
    virtual.add_backend_argument(parser)
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
        from hilbot.driver.runtime.config import load_config

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
    if args.backend == "virtual":
        return _run_virtual(args)
    try:
        buses = buses_from_args(args)
    except (ValueError, HalError) as exc:
        print(f"hilbot doctor: {exc}", file=sys.stderr)
        return 2
    return diagnose_buses(buses, args.margin_ms)


def _run_virtual(args: argparse.Namespace) -> int:
    """``--backend virtual``: diagnose virtual buses of the robot (its config), ended after."""
    given = [f"--{name}" for name in ("port", "baud", "protocol", "servo", "family")]
    given = [option for option in given if getattr(args, option[2:])]
    if given:
        print(
            f"hilbot doctor: {', '.join(given)} "
            f"{'describe' if len(given) > 1 else 'describes'} a bus of yours; --backend virtual "
            "serves the robot config's buses (drop them)",
            file=sys.stderr,
        )
        return 2
    try:
        config = virtual.load_robot(args.config)
    except (ValueError, HalError) as exc:
        print(f"hilbot doctor: {exc}", file=sys.stderr)
        return 2
    margin = virtual.virtual_margin(args.margin_ms)

    def check(ports: dict[str, str]) -> int:
        buses = []
        for name, spec in config.bus_specs().items():
            print(virtual.bus_line(config, name, ports[name]), flush=True)
            buses.append((dataclasses.replace(spec, port=ports[name]), config.servo_specs(name)))
        return diagnose_buses(buses, margin)

    return virtual.on_virtual_buses(config, check)


def diagnose_buses(buses: Sequence[tuple[BusSpec, Sequence[ServoSpec]]], margin_ms: float) -> int:
    """Diagnose each bus and print what was found; 1 when something is wrong."""
    worst = Level.OK
    for spec, servos in buses:
        kind = family(spec.family).describe(spec.protocol)
        print(f"== {spec.port}: {spec.baudrate} bit/s, {kind}, {len(servos)} servos")
        findings, budget = check_bus(spec, servos, margin_ms)
        for f in findings:
            print(f"[{f.level.value:>5}] {f.subject}: {f.message}")
            if f.level is Level.ERROR or (f.level is Level.WARN and worst is Level.OK):
                worst = f.level
        if budget:
            print("timing budget:")
            print("  " + budget)
    return 1 if worst is Level.ERROR else 0


#: [ms] the least reply margin of the second look at a bus whose first look found errors.
PATIENT_MARGIN_MS = 100.0
#: Looks with that margin at most: a subject failing in each is the servo's fault.
PATIENT_LOOKS = 3


def check_bus(
    spec: BusSpec, servos: Sequence[ServoSpec], margin_ms: float
) -> tuple[list[Finding], str]:
    """Diagnose one bus, telling a late host from a servo's fault; findings and budget.

    A reply this host picked up late looks like a lost or garbled one (``rx timeout``,
    ``rx corrupt``, "Status Return Level probably 0"). So the host's scheduling stalls
    are watched while the bus is checked, and a bus with errors is looked at again with
    a patient reply margin. What stays is the servo's or the wire's fault; what goes away
    was a late reply: the host's (it stalled meanwhile: a ``host`` warning says so and
    which ``--margin-ms`` to use) or, with the host on time, the servo's or the adapter's
    (a warning on that servo).
    """
    findings, budget, stall = _diagnose(spec, servos, margin_ms)
    errors = [f for f in findings if f.level is Level.ERROR]
    if not errors:
        return [*findings, _host_finding(stall, margin_ms)], budget
    patient = max(PATIENT_MARGIN_MS, 2 * margin_ms, ROUND_TRIP_WAKEUPS * stall)
    patient = 10.0 * math.ceil(patient / 10.0)
    again, budget, failing = _patient_looks(spec, servos, patient, {f.subject for f in errors})
    late = sorted({f.subject for f in errors} - failing)
    if not late:
        note = (
            f"threads here woke at most {stall:.1f} ms late; the errors stayed with a "
            f"{patient:g} ms reply margin: they are the servos' or the wiring's, not the host's"
        )
        return [*again, Finding(Level.OK, "host", note)], budget
    if stall > margin_ms / 2:
        who = ", ".join(subject.split(" (")[0] for subject in late)
        note = (
            f"replies from {who} came later than --margin-ms {margin_ms:g} allows, and threads "
            f"here woke up to {stall:.1f} ms late: this host was busy, the servos are not at "
            f"fault (they answered with a {patient:g} ms margin); on this machine use "
            f"--margin-ms {_suggested(stall):g}"
        )
        return [*again, Finding(Level.WARN, "host", note)], budget
    slow = (
        f"replies later than --margin-ms {margin_ms:g} allows, though this host was on time "
        f"(threads woke at most {stall:.1f} ms late): check the adapter's USB latency timer "
        f"and the servo's Return Delay Time; it answered with --margin-ms {patient:g}"
    )
    return [*again, *(Finding(Level.WARN, subject, slow) for subject in late)], budget


def _patient_looks(
    spec: BusSpec, servos: Sequence[ServoSpec], margin_ms: float, failing: set[str]
) -> tuple[list[Finding], str, set[str]]:
    """Look again with ``margin_ms``, up to :data:`PATIENT_LOOKS` times or until all is well.

    Returns the findings of the look with the fewest errors (less the errors of a subject
    that did not fail every time), its budget, and the subjects of ``failing`` that failed
    in every look: a fault fails every time, a late reply now and then.
    """
    best: tuple[list[Finding], str] = ([], "")
    fewest = math.inf
    for _ in range(PATIENT_LOOKS):
        findings, budget, _ = _diagnose(spec, servos, margin_ms)
        errors = {f.subject for f in findings if f.level is Level.ERROR}
        failing &= errors
        if len(errors) < fewest:
            best, fewest = (findings, budget), len(errors)
        if not errors:
            break
    findings, budget = best
    kept = [f for f in findings if f.level is not Level.ERROR or f.subject in failing]
    return kept, budget, failing


def _diagnose(
    spec: BusSpec, servos: Sequence[ServoSpec], margin_ms: float
) -> tuple[list[Finding], str, float]:
    """One look at the bus: findings, budget and the host's worst stall [ms] meanwhile."""
    with StallMonitor() as watch:
        findings, budget = family(spec.family).diagnose(spec, servos, margin_ms=margin_ms)
    return findings, budget, watch.worst_ms


def _host_finding(stall: float, margin_ms: float) -> Finding:
    if stall <= margin_ms:
        return Finding(Level.OK, "host", f"threads here woke at most {stall:.1f} ms late")
    return Finding(
        Level.WARN,
        "host",
        f"threads here woke up to {stall:.1f} ms late, more than --margin-ms {margin_ms:g}: "
        f"on this busy host a reply can be called lost; if one is, use --margin-ms "
        f"{_suggested(stall):g}",
    )


def _suggested(stall: float) -> float:
    """A ``--margin-ms`` [ms] that covers a round trip's stalls of ``stall`` ms, in tens."""
    return 10.0 * math.ceil(max(VIRTUAL_MARGIN_MS, ROUND_TRIP_WAKEUPS * stall) / 10.0)
