"""Feetech bus maintenance behind ``hilbot scan``, ``servo`` and ``doctor --family feetech``.

Synchronous on purpose: these run from the command line, one at a time, on a port
nothing else uses. EEPROM registers (ID, Baud Rate, Return Delay Time, the angle
limits, Homing Offset) are written with torque off and behind the Lock register: Lock
0 opens the EEPROM, the write is saved, Lock 1 closes it again (memory table, "Lock
flag": with Lock 1 a write takes effect but is lost at power-off).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from hilbot.hal.dynamixel.tools import ChangeError, Finding, Level
from hilbot.hal.errors import CommError, HalError, PortError
from hilbot.hal.feetech import protocol
from hilbot.hal.feetech.bus import FeetechBus
from hilbot.hal.feetech.tables import (
    BAUD_RATES,
    FeetechModel,
    FeetechUnits,
    feetech_budget,
    models_with_number,
)
from hilbot.hal.feetech.tables import FeetechRegister as N
from hilbot.hal.mapping import BusSpec, ServoSpec

__all__ = [
    "COMMON_BAUD_RATES",
    "FoundFeetech",
    "change_baudrate",
    "change_id",
    "diagnose",
    "open_bus",
    "scan",
    "set_register",
]

#: Baud rates a scan tries by default: the STS3215 factory rate first.
COMMON_BAUD_RATES = (1_000_000, 500_000, 115_200)
#: Registers ``hilbot servo --family feetech`` may set by option name.
SETTABLE = {
    "return_delay": N.RETURN_DELAY_TIME,
    "min_angle_limit": N.MIN_ANGLE_LIMIT,
    "max_angle_limit": N.MAX_ANGLE_LIMIT,
    "max_torque": N.MAX_TORQUE,
    "homing_offset": N.HOMING_OFFSET,
}


@dataclass(frozen=True, slots=True)
class FoundFeetech:
    """A Feetech servo that answered a scan."""

    id: int
    model_number: int
    model: str  # "unknown (<number>)" when hilbot does not support it
    firmware: tuple[int, int]
    baudrate: int


@contextlib.contextmanager
def open_bus(port: str, baudrate: int, *, margin_ms: float = 3.0) -> Iterator[FeetechBus]:
    """A :class:`FeetechBus` opened on ``port`` (no retries), closed on exit."""
    bus = FeetechBus(port, baudrate, retries=0, margin_ms=margin_ms)
    bus.open()
    try:
        yield bus
    finally:
        bus.close()


def _word(bus: FeetechBus, servo_id: int, address: int) -> int:
    # Model Number is read before the series (and so the byte order) is known: both
    # orders are tried against the known numbers, as the vendor tools do.
    data, _ = bus.read(servo_id, address, 2)
    little = int.from_bytes(data, "little")
    return little if models_with_number(little) else int.from_bytes(data, "big")


def scan(
    port: str,
    baudrates: Iterable[int] = COMMON_BAUD_RATES,
    *,
    ids: Iterable[int] | None = None,
    margin_ms: float = 3.0,
) -> list[FoundFeetech]:
    """Ping every id in ``ids`` (default 0..253) at each baud rate; what answered."""
    rates = list(baudrates)
    found: list[FoundFeetech] = []
    if not rates:
        return found
    with open_bus(port, rates[0], margin_ms=margin_ms) as bus:
        for rate in rates:
            bus.set_baudrate(rate)
            for servo_id in ids if ids is not None else range(protocol.MAX_ID + 1):
                if bus.try_ping(servo_id) is None:
                    continue
                found.append(_identify_found(bus, servo_id, rate))
    return found


def _identify_found(bus: FeetechBus, servo_id: int, rate: int) -> FoundFeetech:
    try:
        number = _word(bus, servo_id, 3)
        (major,), _ = bus.read(servo_id, 0, 1)
        (minor,), _ = bus.read(servo_id, 1, 1)
    except CommError:
        return FoundFeetech(servo_id, -1, "unknown (no read)", (-1, -1), rate)
    known = models_with_number(number)
    name = "/".join(m.name for m in known) if known else f"unknown ({number})"
    return FoundFeetech(servo_id, number, name, (major, minor), rate)


def _identify(bus: FeetechBus, servo_id: int) -> FeetechModel:
    if bus.try_ping(servo_id) is None and bus.try_ping(servo_id) is None:
        raise ChangeError(
            f"servo {servo_id} does not answer on {bus.port.name} at {bus.baudrate} bit/s; "
            "`hilbot scan --family feetech` finds it",
            servo_id=servo_id,
        )
    number = _word(bus, servo_id, 3)
    known = models_with_number(number)
    if not known:
        raise ChangeError(f"servo {servo_id} is an unsupported model ({number})", servo_id=servo_id)
    return known[0]


def _unlocked_write(
    bus: FeetechBus, servo_id: int, spec: FeetechModel, name: N, value: int
) -> None:
    """Torque off, Lock 0, write ``name``, Lock 1 (unless the id itself changed)."""
    reg = spec.register(name)
    if not reg.in_range(value):
        raise ChangeError(
            f"{reg.label} must be in {reg.min}..{reg.max}, got {value}", servo_id=servo_id
        )
    torque, lock = spec.register(N.TORQUE_ENABLE), spec.lock_register
    bus.write(servo_id, torque.address, torque.encode(0))
    bus.write(servo_id, lock.address, lock.encode(0))
    bus.write(servo_id, reg.address, reg.encode(value))


def _lock(bus: FeetechBus, servo_id: int, spec: FeetechModel) -> None:
    lock = spec.lock_register
    bus.write(servo_id, lock.address, lock.encode(1))


def set_register(bus: FeetechBus, servo_id: int, option: str, value: int) -> N:
    """Set one of :data:`SETTABLE` (saved to EEPROM) and read it back; its name."""
    name = SETTABLE[option]
    spec = _identify(bus, servo_id)
    _unlocked_write(bus, servo_id, spec, name, value)
    _lock(bus, servo_id, spec)
    reg = spec.register(name)
    data, _ = bus.read(servo_id, reg.address, reg.size)
    if reg.decode(data) != value:
        raise ChangeError(
            f"servo {servo_id}: {reg.label} reads {reg.decode(data)} after writing {value}",
            servo_id=servo_id,
        )
    return name


def change_id(bus: FeetechBus, servo_id: int, new_id: int) -> FeetechModel:
    """Give servo ``servo_id`` the id ``new_id`` (which must be free); it must answer there."""
    if not 0 <= new_id <= protocol.MAX_ID:
        raise ChangeError(f"an id is 0..{protocol.MAX_ID}, got {new_id}", servo_id=servo_id)
    spec = _identify(bus, servo_id)
    if new_id != servo_id and bus.try_ping(new_id) is not None:
        raise ChangeError(f"id {new_id} is taken by another servo", servo_id=servo_id)
    _unlocked_write(bus, servo_id, spec, N.ID, new_id)
    if bus.try_ping(new_id) is None:
        raise ChangeError(f"servo {servo_id} does not answer at id {new_id}", servo_id=servo_id)
    _lock(bus, new_id, spec)
    return spec


def change_baudrate(bus: FeetechBus, servo_id: int, baudrate: int) -> FeetechModel:
    """Switch servo ``servo_id`` to ``baudrate`` [bit/s]; it must answer at the new rate."""
    spec = _identify(bus, servo_id)
    try:
        value = spec.baud_value(baudrate)
    except ValueError as exc:
        raise ChangeError(str(exc), servo_id=servo_id) from None
    _unlocked_write(bus, servo_id, spec, N.BAUD_RATE, value)
    bus.set_baudrate(baudrate)
    if bus.try_ping(servo_id) is None and bus.try_ping(servo_id) is None:
        raise ChangeError(
            f"servo {servo_id} does not answer at {baudrate} bit/s", servo_id=servo_id
        )
    _lock(bus, servo_id, spec)
    return spec


def diagnose(
    spec: BusSpec, servos: Sequence[ServoSpec], *, margin_ms: float = 3.0
) -> tuple[list[Finding], str]:
    """Check one Feetech bus: each servo's model, return delay, angle limits, status.

    Returns the findings and the timing budget text. Writes nothing.
    """
    findings: list[Finding] = []
    delays = []
    try:
        with open_bus(spec.port, spec.baudrate, margin_ms=margin_ms) as bus:
            for servo in servos:
                subject = f"servo {servo.id} ({servo.joint})"
                try:
                    found, delay = _diagnose_one(bus, servo, subject, findings)
                except HalError as exc:
                    findings.append(Finding(Level.ERROR, subject, str(exc)))
                    continue
                if found:
                    delays.append(delay)
    except PortError as exc:
        findings.append(Finding(Level.ERROR, f"bus {spec.port}", str(exc)))
    budget = feetech_budget(spec, servos, return_delay_time=max(delays, default=0))
    return findings, budget.describe()


def _diagnose_one(
    bus: FeetechBus, servo: ServoSpec, subject: str, findings: list[Finding]
) -> tuple[bool, int]:
    unit = FeetechUnits.of(servo)
    model = unit.model
    if bus.try_ping(servo.id) is None and bus.try_ping(servo.id) is None:
        findings.append(Finding(Level.ERROR, subject, "does not answer a ping"))
        return False, 0
    number = _word(bus, servo.id, 3)
    if number != model.model_number:
        findings.append(
            Finding(Level.ERROR, subject, f"model number {number}, config says {model.name}")
        )
        return False, 0

    def value(name: N) -> int:
        reg = model.register(name)
        data, _ = bus.read(servo.id, reg.address, reg.size)
        return reg.decode(data)

    delay = value(N.RETURN_DELAY_TIME)
    level = Level.OK if delay == 0 else Level.WARN
    hint = "" if delay == 0 else "; hilbot servo --family feetech ... --return-delay 0"
    findings.append(Finding(level, subject, f"return delay {2 * delay} µs{hint}"))
    low, high = value(N.MIN_ANGLE_LIMIT), value(N.MAX_ANGLE_LIMIT)
    lo, hi = sorted(unit.position(t) for t in (low, high))
    findings.append(
        Finding(Level.OK, subject, f"angle limits {low}..{high} = [{lo:.3f}, {hi:.3f}] rad")
    )
    torque = value(N.MAX_TORQUE)
    findings.append(
        Finding(
            Level.OK,
            subject,
            f"max torque {torque / 10:g} % (loaded into Torque Limit at power-up; with no Bus "
            "Watchdog it bounds what a goal left behind by a dead host pushes with: "
            "--max-torque lowers it)",
        )
    )
    status = protocol.StatusError(value(N.STATUS) & 0xFF)
    if status:
        findings.append(Finding(Level.ERROR, subject, f"status: {status.describe()}"))
    return True, delay


BAUD_CHOICES = tuple(BAUD_RATES.values())
