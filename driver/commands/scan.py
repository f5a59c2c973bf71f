"""List the Dynamixel or Feetech servos on a serial port: id, model, firmware, baud, protocol.

Dynamixel Protocol 2.0 is scanned with one broadcast ping per baud rate; Protocol 1.0
has no broadcast ping, so each id is pinged (a second or two per baud rate), and so is
each id of a Feetech bus (``--family feetech``). A Feetech servo answers a Protocol
1.0 scan too: it is named as the Feetech model it is, with the flag to add.

Example: hilbot scan --port /dev/ttyUSB0 --baud 57600,1000000 --protocol 2

Without hardware, ``hilbot scan ROBOT --backend virtual`` scans a virtual bus of that
robot (a shipped name or a YAML file), at its config's baud rate, protocol and family
unless given; the bus ends with the command.

Without ``--port``, or with one that cannot be opened, it names the serial ports this
machine has (pyserial's ``list_ports``: ``COM3`` on Windows, ``/dev/tty.usbserial-*``
on macOS, ``/dev/ttyUSB0`` on Linux) in one line.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from hilbot.driver.commands import virtual_rehearsal as virtual
from hilbot.driver.commands.failures import candidate_ports, port_problem, reason_of
from hilbot.hal.dynamixel.tools import COMMON_BAUD_RATES, FoundServo, scan
from hilbot.hal.errors import HalError, PortError
from hilbot.hal.family import family


def parse_baud_list(text: str) -> list[int]:
    """``"57600,1000000"`` -> ``[57600, 1000000]``; ``argparse`` error on anything else."""
    try:
        rates = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"baud rates are comma-separated integers, got {text!r}"
        ) from None
    if not rates or any(r <= 0 for r in rates):
        raise argparse.ArgumentTypeError(f"baud rates must be positive, got {text!r}")
    return rates


def parse_id_range(text: str) -> list[int]:
    """``"1-6,10"`` -> ``[1, 2, 3, 4, 5, 6, 10]``."""
    ids: list[int] = []
    try:
        for part in text.split(","):
            lo, _, hi = part.partition("-")
            ids.extend(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        raise argparse.ArgumentTypeError(f"ids look like 1-6,10, got {text!r}") from None
    if any(not 0 <= i <= 252 for i in ids):
        raise argparse.ArgumentTypeError(f"ids must be in 0..252, got {text!r}")
    return ids


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``hilbot scan`` options."""
    parser.add_argument(
        "robot",
        nargs="?",
        help="--backend virtual: the robot whose virtual bus to scan (a shipped name or a "
        f"YAML file; default {virtual.DEFAULT_ROBOT})",
    )
    virtual.add_backend_argument(parser)
    parser.add_argument(
        "--port",
        help="serial device, e.g. /dev/ttyUSB0, COM3 or /dev/tty.usbserial-A1B2 "
        "(without it: the serial ports here are listed)",
    )
    parser.add_argument(
        "--baud",
        type=parse_baud_list,
        default=list(COMMON_BAUD_RATES),
        help="comma-separated baud rates to try (default: 57600 up to 4000000)",
    )
    parser.add_argument(
        "--protocol", type=int, choices=(1, 2), help="only this protocol (default: 2, then 1)"
    )
    parser.add_argument(
        "--family",
        choices=("dynamixel", "feetech"),
        help="servo family (default dynamixel; feetech: STS/SCS, pinging each id, default baud "
        "1000000,500000,115200)",
    )
    parser.add_argument(
        "--ids", type=parse_id_range, help="only these ids, e.g. 1-6 (faster on 1.0)"
    )
    parser.add_argument(
        "--margin-ms",
        type=float,
        default=3.0,
        help="how long past its wire time a reply may be late [ms] (default 3)",
    )


def run(args: argparse.Namespace) -> int:
    """Scan and print a table; exit 1 when nothing answers, 2 on a port error."""
    problem = virtual.virtual_problem(args, args.robot)
    if problem is not None:
        print(f"hilbot scan: {problem}", file=sys.stderr)
        return 2
    if args.backend == "virtual":
        return _run_virtual(args)
    if args.port is None:
        print(f"hilbot scan: {no_port_given()}", file=sys.stderr)
        return 2
    return scan_port(args)


def _run_virtual(args: argparse.Namespace) -> int:
    """``--backend virtual``: scan each bus of a virtual copy of the robot; 0 if any answered."""
    from hilbot.driver.runtime.errors import DriverError

    try:
        config = virtual.load_robot(args.robot)
    except DriverError as exc:
        print(f"hilbot scan: {exc}", file=sys.stderr)
        return 2
    margin = virtual.virtual_margin(args.margin_ms)

    def scan_buses(ports: dict[str, str]) -> int:
        codes = []
        for bus in config.buses:
            print(virtual.bus_line(config, bus.name, ports[bus.name]), flush=True)
            one = argparse.Namespace(**vars(args))
            one.port, one.margin_ms = ports[bus.name], margin
            one.family = args.family or bus.family
            if args.baud == list(COMMON_BAUD_RATES):  # not given: the bus's rate
                one.baud = [bus.baudrate]
            if args.protocol is None and one.family == bus.family and family(bus.family).protocols:
                one.protocol = bus.protocol
            codes.append(scan_port(one))
        return min(codes)

    return virtual.on_virtual_buses(config, scan_buses)


def scan_port(args: argparse.Namespace) -> int:
    """Scan ``args.port`` as the options say; print the table."""
    return _SCANS[args.family or "dynamixel"](args)


def _scan_dynamixel(args: argparse.Namespace) -> int:
    protocols = (args.protocol,) if args.protocol else family("dynamixel").protocols
    try:
        found = scan(args.port, args.baud, protocols, ids=args.ids, margin_ms=args.margin_ms)
    except PortError as exc:
        problem = port_problem(exc.port, reason_of(exc), "--port", "give the right one with --port")
        print(f"hilbot scan: {problem}", file=sys.stderr)
        return 2
    except HalError as exc:
        print(f"hilbot scan: {exc}", file=sys.stderr)
        return 2
    if not found:
        rates = ", ".join(str(r) for r in args.baud)
        print(f"no servo answered on {args.port} at {rates} bit/s (protocol {protocols})")
        return 1
    feetech = _feetech_among(args.port, found, args.margin_ms)
    print(f"{'id':>3}  {'model':<20} {'number':>6}  {'firmware':>8}  {'baud':>8}  protocol")
    for s in found:
        f = feetech.get((s.id, s.baudrate))
        if f is not None:
            firmware = f"{f.firmware[0]}.{f.firmware[1]}" if f.firmware[0] >= 0 else "?"
            print(
                f"{f.id:>3}  {f.model:<20} {f.model_number:>6}  {firmware:>8}  "
                f"{f.baudrate:>8}  Feetech"
            )
            continue
        firmware = str(s.firmware) if s.firmware >= 0 else "?"
        print(
            f"{s.id:>3}  {s.model:<20} {s.model_number:>6}  {firmware:>8}  "
            f"{s.baudrate:>8}  {s.protocol}.0"
        )
    if feetech:
        print(feetech_hint(args.port, list(feetech.values())))
    return 0


def _feetech_among(
    port: str, found: list[FoundServo], margin_ms: float
) -> dict[tuple[int, int], Any]:
    """The Feetech servos among a Dynamixel scan's unknown Protocol 1.0 models.

    A Feetech STS/SCS servo speaks a Protocol 1.0 look-alike, so a Protocol 1.0 scan finds
    it, but reads its firmware version (addresses 0 and 1) as the model number (3.6 reads
    as 1539). Each such servo is asked for its Feetech Model Number (address 3) and its ID
    register (address 5: a Dynamixel keeps Return Delay Time there, so an unknown Dynamixel
    whose bytes at 3 happen to spell a Feetech number is not taken for one). Those that
    pass are returned, keyed by ``(id, baud rate)``.
    """
    unknown: dict[int, list[int]] = {}
    for s in found:
        if s.protocol == 1 and s.model.startswith("unknown"):
            unknown.setdefault(s.baudrate, []).append(s.id)
    out: dict[tuple[int, int], Any] = {}
    for rate, ids in unknown.items():
        out.update({(f.id, rate): f for f in feetech_servos(port, rate, ids, margin_ms)})
    return out


def feetech_servos(port: str, rate: int, ids: list[int], margin_ms: float) -> list[Any]:
    """The Feetech servos of a known model among ``ids`` at ``rate`` (``FoundFeetech``).

    A servo counts when its Model Number is a known Feetech one and its ID register holds
    its id; a port error or a servo that stops answering leaves it out.
    """
    from hilbot.hal.feetech.tools import scan as scan_feetech

    try:
        answers = scan_feetech(port, [rate], ids=ids, margin_ms=margin_ms)
        known = [f for f in answers if not f.model.startswith("unknown")]
        return _own_ids(port, rate, known, margin_ms)
    except HalError:
        return []


def _own_ids(port: str, rate: int, servos: list[Any], margin_ms: float) -> list[Any]:
    """Those of ``servos`` whose Feetech ID register holds their own id."""
    from hilbot.hal.feetech.tables import FeetechRegister, models_with_number
    from hilbot.hal.feetech.tools import open_bus

    if not servos:
        return []
    out = []
    with open_bus(port, rate, margin_ms=margin_ms) as bus:
        for servo in servos:
            reg = models_with_number(servo.model_number)[0].register(FeetechRegister.ID)
            data, _ = bus.read(servo.id, reg.address, reg.size)
            if reg.decode(data) == servo.id:
                out.append(servo)
    return out


def feetech_hint(port: str, servos: list[Any]) -> str:
    """The line after a scan that found Feetech servos without ``--family feetech``."""
    ids = ", ".join(str(s.id) for s in servos)
    models = ", ".join(sorted({s.model for s in servos}))
    are = "are Feetech servos" if len(servos) > 1 else "is a Feetech servo"
    return (
        f"id {ids} {are} ({models}), not Dynamixel: add --family feetech to hilbot scan, "
        f"servo and doctor (hilbot scan --port {port} --family feetech)"
    )


def no_port_given() -> str:
    """The one line for a scan without ``--port``: the candidate ports, or that there are none."""
    found = candidate_ports()
    if not found:
        return "no --port given, and no serial port found: is the adapter plugged in and powered?"
    return f"no --port given; serial ports here: {', '.join(found)}; scan one with --port PORT"


def _run_feetech(args: argparse.Namespace) -> int:
    from hilbot.hal.feetech.tools import COMMON_BAUD_RATES as FEETECH_RATES
    from hilbot.hal.feetech.tools import scan as scan_feetech

    rates = args.baud if args.baud != list(COMMON_BAUD_RATES) else list(FEETECH_RATES)
    try:
        found = scan_feetech(args.port, rates, ids=args.ids, margin_ms=args.margin_ms)
    except PortError as exc:
        problem = port_problem(exc.port, reason_of(exc), "--port", "give the right one with --port")
        print(f"hilbot scan: {problem}", file=sys.stderr)
        return 2
    except HalError as exc:
        print(f"hilbot scan: {exc}", file=sys.stderr)
        return 2
    if not found:
        print(f"no Feetech servo answered on {args.port} at {', '.join(map(str, rates))} bit/s")
        return 1
    print(f"{'id':>3}  {'model':<24} {'number':>6}  {'firmware':>8}  {'baud':>8}")
    for s in found:
        firmware = f"{s.firmware[0]}.{s.firmware[1]}" if s.firmware[0] >= 0 else "?"
        print(f"{s.id:>3}  {s.model:<24} {s.model_number:>6}  {firmware:>8}  {s.baudrate:>8}")
    return 0


#: How ``hilbot scan`` scans a bus of each family.
_SCANS = {"dynamixel": _scan_dynamixel, "feetech": _run_feetech}
