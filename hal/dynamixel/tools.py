"""Bus maintenance behind ``hilbot scan``, ``hilbot servo`` and ``hilbot doctor``.

Synchronous on purpose: these run from the command line, one at a time, on a
port nothing else uses.
"""

from __future__ import annotations

import contextlib
import enum
import logging
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from hilbot.hal.bus.port import latency_timer_ms
from hilbot.hal.dynamixel.bus import DynamixelBus
from hilbot.hal.dynamixel.layout import BusLayout, ServoSlot
from hilbot.hal.dynamixel.startup import hardware_status, identify, inspect, patient_ping
from hilbot.hal.dynamixel.tables import ModelSpec, RegisterName, model_by_number
from hilbot.hal.dynamixel.timing import bus_budget
from hilbot.hal.errors import CommError, HalError
from hilbot.hal.mapping import MAX_SERVO_ID, BusSpec, ServoSpec

N = RegisterName
COMMON_BAUD_RATES = (57600, 115200, 1_000_000, 2_000_000, 3_000_000, 4_000_000)


@dataclass(frozen=True, slots=True)
class FoundServo:
    """A servo that answered a scan."""

    id: int
    model_number: int
    model: str  # "unknown (<number>)" when hilbot does not support it
    firmware: int
    baudrate: int
    protocol: int


@contextlib.contextmanager
def open_bus(
    port: str, baudrate: int, protocol: int, *, margin_ms: float = 3.0
) -> Iterator[DynamixelBus]:
    """A :class:`DynamixelBus` opened on ``port``, closed on exit."""
    bus = DynamixelBus(port, baudrate, protocol, retries=0, margin_ms=margin_ms)
    bus.open()
    try:
        yield bus
    finally:
        bus.close()


def _firmware(bus: DynamixelBus, servo_id: int, spec: ModelSpec | None) -> int:
    if spec is None:
        return -1
    reg = spec.register(N.FIRMWARE_VERSION)
    try:
        return reg.decode(bus.read(servo_id, reg.address, reg.size)[0])
    except HalError:
        return -1


def scan(
    port: str,
    baudrates: Iterable[int],
    protocols: Iterable[int] = (2, 1),
    *,
    ids: Iterable[int] | None = None,
    margin_ms: float = 3.0,
) -> list[FoundServo]:
    """Find every servo on ``port`` across baud rates and protocols.

    Protocol 2.0 uses one broadcast ping per baud rate; Protocol 1.0 (which has
    none) pings each id in ``ids`` (default 0..252).
    """
    found: list[FoundServo] = []
    for protocol in protocols:
        rates = list(baudrates)
        if not rates:
            return found
        with open_bus(port, rates[0], protocol, margin_ms=margin_ms) as bus:
            for rate in rates:
                bus.set_baudrate(rate)
                found.extend(_scan_one(bus, rate, ids))
    return found


def _scan_one(bus: DynamixelBus, rate: int, ids: Iterable[int] | None) -> list[FoundServo]:
    wanted = set(range(MAX_SERVO_ID + 1) if ids is None else ids)
    answers: dict[int, tuple[int, int]] = {}
    if bus.protocol == 2 and ids is None:
        answers = {i: v for i, v in bus.broadcast_ping().items() if i in wanted}
    else:
        for servo_id in sorted(wanted):
            number = bus.try_ping(servo_id)
            if number is not None:
                spec = model_by_number(bus.protocol, number)
                answers[servo_id] = (number, _firmware(bus, servo_id, spec))
    out = []
    for servo_id, (number, firmware) in sorted(answers.items()):
        spec = model_by_number(bus.protocol, number)
        out.append(
            FoundServo(
                id=servo_id,
                model_number=number,
                model=spec.name if spec else f"unknown ({number})",
                firmware=firmware,
                baudrate=rate,
                protocol=bus.protocol,
            )
        )
    return out


class ChangeError(HalError):
    """A ``hilbot servo`` change was refused or did not take: servo_id, reason."""

    def __init__(self, message: str, *, servo_id: int) -> None:
        super().__init__(message)
        self.servo_id = servo_id


def _identify(bus: DynamixelBus, servo_id: int) -> ModelSpec:
    # patient, as start-up is: one lost ping must not fail a change
    number = patient_ping(bus, servo_id)
    if number is None:
        raise ChangeError(
            f"servo {servo_id} does not answer on {bus.port_name} at {bus.baudrate} bit/s "
            f"(protocol {bus.protocol}.0); `hilbot scan` finds it",
            servo_id=servo_id,
        )
    spec = model_by_number(bus.protocol, number)
    if spec is None:
        raise ChangeError(f"servo {servo_id} is an unsupported model ({number})", servo_id=servo_id)
    return spec


def _write(
    bus: DynamixelBus, servo_id: int, spec: ModelSpec, name: RegisterName, value: int
) -> None:
    reg = spec.register(name)
    if not reg.min <= value <= reg.max:
        raise ChangeError(
            f"{name.value} must be in {reg.min}..{reg.max}, got {value}", servo_id=servo_id
        )
    bus.write(servo_id, reg.address, reg.encode(value))


def _torque_off(bus: DynamixelBus, servo_id: int, spec: ModelSpec) -> None:
    # EEPROM registers (ID, baud rate, return delay) are locked while torque is on.
    _write(bus, servo_id, spec, N.TORQUE_ENABLE, 0)


def change_id(bus: DynamixelBus, servo_id: int, new_id: int) -> ModelSpec:
    """Give servo ``servo_id`` the id ``new_id``, after checking nothing answers there.

    Torque is turned off first; afterwards the servo must answer at ``new_id``
    with the same model and no longer at ``servo_id``.
    """
    if not 0 <= new_id <= MAX_SERVO_ID:
        raise ChangeError(f"new id must be in 0..{MAX_SERVO_ID}, got {new_id}", servo_id=servo_id)
    spec = _identify(bus, servo_id)
    if new_id == servo_id:
        return spec
    taken = bus.try_ping(new_id)
    if taken is not None:
        raise ChangeError(
            f"id {new_id} is already taken on this bus (model number {taken}); pick a free id",
            servo_id=servo_id,
        )
    _torque_off(bus, servo_id, spec)
    with contextlib.suppress(CommError):
        # the status of this write comes back from the new id, which the SDK ignores
        _write(bus, servo_id, spec, N.ID, new_id)
    if bus.try_ping(new_id) != spec.model_number or bus.try_ping(servo_id) is not None:
        raise ChangeError(
            f"servo {servo_id} did not move to id {new_id}; scan the bus", servo_id=servo_id
        )
    return spec


def change_baudrate(bus: DynamixelBus, servo_id: int, baudrate: int) -> ModelSpec:
    """Switch servo ``servo_id`` to ``baudrate`` and follow it there; verify it answers."""
    spec = _identify(bus, servo_id)
    value = spec.baud_value(baudrate)  # ValueError lists the model's rates
    _torque_off(bus, servo_id, spec)
    reg = spec.register(N.BAUD_RATE)
    with contextlib.suppress(CommError):
        # the status may already go out at the new rate and be lost
        bus.write(servo_id, reg.address, reg.encode(value))
    old = bus.baudrate
    bus.set_baudrate(baudrate)
    if bus.try_ping(servo_id) != spec.model_number:
        bus.set_baudrate(old)
        raise ChangeError(
            f"servo {servo_id} does not answer at {baudrate} bit/s after the change; "
            "scan both rates",
            servo_id=servo_id,
        )
    return spec


def set_return_delay(bus: DynamixelBus, servo_id: int, value: int) -> ModelSpec:
    """Set Return Delay Time (2 µs units; 0 is fastest) and read it back."""
    spec = _identify(bus, servo_id)
    _torque_off(bus, servo_id, spec)
    _write(bus, servo_id, spec, N.RETURN_DELAY_TIME, value)
    reg = spec.register(N.RETURN_DELAY_TIME)
    if reg.decode(bus.read(servo_id, reg.address, reg.size)[0]) != value:
        raise ChangeError(f"servo {servo_id} kept its old return delay time", servo_id=servo_id)
    return spec


#: ``hilbot servo`` limit options -> the register they set, per protocol.
LIMIT_OPTIONS: dict[str, dict[int, RegisterName]] = {
    "min_position_limit": {2: N.MIN_POSITION_LIMIT, 1: N.CW_ANGLE_LIMIT},
    "max_position_limit": {2: N.MAX_POSITION_LIMIT, 1: N.CCW_ANGLE_LIMIT},
    "pwm_limit": {2: N.PWM_LIMIT},
    "current_limit": {2: N.CURRENT_LIMIT},
}


def set_limit(bus: DynamixelBus, servo_id: int, option: str, value: int) -> RegisterName:
    """Set one limit register (an EEPROM one: torque goes off first) and read it back.

    ``option`` is a key of :data:`LIMIT_OPTIONS` (``"max_position_limit"``, ...): Min/Max
    Position Limit on Protocol 2.0 are CW/CCW Angle Limit on 1.0. Returns the register.

    Raises:
        ChangeError: the model has no such register, the value is outside its range, or
            it did not take.
    """
    spec = _identify(bus, servo_id)
    name = LIMIT_OPTIONS[option].get(2 if N.MIN_POSITION_LIMIT in spec.table else 1)
    if name is None or not spec.has(name):
        raise ChangeError(
            f"servo {servo_id} ({spec.name}) has no {option.replace('_', ' ')} register",
            servo_id=servo_id,
        )
    _torque_off(bus, servo_id, spec)
    _write(bus, servo_id, spec, name, value)
    reg = spec.register(name)
    found = reg.decode(bus.read(servo_id, reg.address, reg.size)[0])
    if found != value:
        raise ChangeError(
            f"servo {servo_id} reads {name.value} {found} after writing {value}",
            servo_id=servo_id,
        )
    return name


class Level(enum.Enum):
    """How bad a doctor finding is."""

    OK = "ok"
    WARN = "warn"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class Finding:
    """One line of ``hilbot doctor`` output."""

    level: Level
    subject: str  # "bus /dev/ttyUSB0", "servo 3", ...
    message: str


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def diagnose(
    spec: BusSpec, servos: Sequence[ServoSpec], *, margin_ms: float = 3.0
) -> tuple[list[Finding], str]:
    """Check one bus: adapter latency, each servo's model, mode, return delay, limits, errors.

    Returns the findings and the timing budget text. Never enables torque or
    writes anything.
    """
    findings: list[Finding] = []
    bus_name = f"bus {spec.port}"
    latency = latency_timer_ms(spec.port)
    if latency is None:
        findings.append(
            Finding(Level.OK, bus_name, "USB latency timer: n/a (not an FTDI adapter on Linux)")
        )
    elif latency > 1:
        findings.append(
            Finding(
                Level.WARN,
                bus_name,
                f"USB latency timer is {latency} ms: every round trip waits for it. Set it to 1: "
                f"echo 1 | sudo tee /sys/bus/usb-serial/devices/{_tty(spec.port)}/latency_timer",
            )
        )
    else:
        findings.append(Finding(Level.OK, bus_name, f"USB latency timer {latency} ms"))
    try:
        layout = BusLayout(spec, servos)
    except HalError as exc:
        return [*findings, Finding(Level.ERROR, bus_name, str(exc))], ""
    log = logging.Logger("hilbot.doctor")  # standalone: findings are printed, not logged
    collect = _Collect()
    log.addHandler(collect)
    rdt = 0
    try:
        with open_bus(spec.port, spec.baudrate, spec.protocol, margin_ms=margin_ms) as bus:
            for slot in layout.slots:
                subject = f"servo {slot.id} ({slot.units.spec.joint})"
                collect.messages.clear()
                try:
                    identify(bus, slot)
                    report = inspect(bus, slot, log)
                    rdt = max(rdt, report.return_delay_time)
                    prefix = f"servo {slot.id}: "
                    findings.extend(
                        Finding(Level.WARN, subject, m.removeprefix(prefix))
                        for m in collect.messages
                    )
                    findings.extend(_limits(bus, slot, subject))
                    flags = hardware_status(bus, slot)
                    if flags:
                        findings.append(
                            Finding(Level.ERROR, subject, f"hardware error: {flags.describe()}")
                        )
                    findings.append(
                        Finding(Level.OK, subject, f"{report.model}, firmware {report.firmware}")
                    )
                except HalError as exc:
                    findings.append(Finding(Level.ERROR, subject, str(exc)))
    except HalError as exc:
        findings.append(Finding(Level.ERROR, bus_name, str(exc)))
    finally:
        log.removeHandler(collect)
    budget = bus_budget(spec, servos, return_delay_time=rdt)
    text = budget.describe()
    turnaround = (latency or 0) / 1000.0
    if turnaround:
        text += (
            f"\n  with the {latency} ms USB latency per round trip: at most "
            f"{budget.rate_with_turnaround(turnaround):.0f} Hz"
        )
    return findings, text


def _tty(port: str) -> str:
    return Path(port).resolve().name


def _limits(bus: DynamixelBus, slot: ServoSlot, subject: str) -> list[Finding]:
    m = slot.model
    lo_name, hi_name = m.limit_registers
    lo_reg, hi_reg = m.register(lo_name), m.register(hi_name)
    lo = lo_reg.decode(bus.read(slot.id, lo_reg.address, lo_reg.size)[0])
    hi = hi_reg.decode(bus.read(slot.id, hi_reg.address, hi_reg.size)[0])
    a, b = slot.units.position(lo), slot.units.position(hi)
    text = (
        f"position limits {lo}..{hi} ticks = joint {min(a, b):+.3f}..{max(a, b):+.3f} "
        f"({'rad' if slot.units.spec.gear_ratio == 1 else 'joint units'})"
    )
    if lo >= hi:
        return [Finding(Level.ERROR, subject, text + ": the range is empty")]
    return [Finding(Level.OK, subject, text)]
