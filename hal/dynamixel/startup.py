"""Start-up checks of a Dynamixel bus, run once when the backend opens.

For every configured servo: ping it and compare the model number with the
configuration, read firmware, return delay time, operating mode and status
return level, and the latched hardware-error status. Problems that make the
robot unsafe or unusable raise :class:`~hilbot.hal.errors.StartupError` naming
the servo; slow settings (a non-zero return delay time) only warn, saying how
to fix them. Nothing here enables torque.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

from hilbot.hal.backend import HardwareErrorFlags
from hilbot.hal.dynamixel.bus import DynamixelBus
from hilbot.hal.dynamixel.layout import BusLayout, ServoSlot
from hilbot.hal.dynamixel.protocol import hardware_flags_from_protocol1
from hilbot.hal.dynamixel.tables import (
    XL320_JOINT,
    OperatingMode,
    Register,
    RegisterName,
    model_by_number,
)
from hilbot.hal.errors import CommTimeout, CrcError, ServoLimitError, StartupError, StartupProblem

N = RegisterName
#: How long start-up keeps pinging a servo that does not answer [s]. A servo answers
#: within its return delay time once it runs, but one that was just powered (or a bus
#: adapter just opened) can miss the first packets; start-up is not time-critical.
PING_PATIENCE = 0.3
PING_PAUSE = 0.02  # [s] between start-up pings
POSITION_MODES = frozenset(
    {OperatingMode.POSITION, OperatingMode.EXTENDED_POSITION, OperatingMode.CURRENT_BASED_POSITION}
)


@dataclass(frozen=True, slots=True)
class ServoReport:
    """What start-up found on one servo."""

    id: int
    model: str
    firmware: int
    return_delay_time: int  # register value, 2 µs units
    hardware_errors: HardwareErrorFlags


def _value(slot: ServoSlot, data: bytes, base: int, name: RegisterName) -> int:
    reg = slot.model.register(name)
    return reg.decode(data[reg.address - base : reg.address - base + reg.size])


def identify(bus: DynamixelBus, slot: ServoSlot) -> None:
    """Ping ``slot``'s servo and check its model number against the configuration.

    Raises:
        StartupError: the servo does not answer, or is another or an unsupported model.
    """
    spec = slot.units.spec
    number = patient_ping(bus, spec.id)
    if number is None:
        raise StartupError(
            f"servo {spec.id} (joint {spec.joint!r}, {spec.model}) does not answer on "
            f"{bus.port_name} at {bus.baudrate} bit/s, protocol {bus.protocol}.0; check power, "
            "cabling, its id, baud rate and firmware protocol (an MX with 1.0 firmware does "
            f"not hear 2.0; `hilbot scan --port {bus.port_name}` lists what answers, on both)",
            servo_id=spec.id,
            problem=StartupProblem.MISSING,
            expected=spec.model,
        )
    found = model_by_number(bus.protocol, number)
    if found is None:
        raise StartupError(
            f"servo {spec.id} reports model number {number}, which hilbot does not support "
            f"(configured: {spec.model})",
            servo_id=spec.id,
            problem=StartupProblem.UNSUPPORTED_MODEL,
            expected=spec.model,
            found=number,
        )
    if found.name != slot.model.name:
        raise StartupError(
            f"servo {spec.id} (joint {spec.joint!r}) is a {found.name}, but the configuration "
            f"says {slot.model.name}; fix the model in the config or the servo's id",
            servo_id=spec.id,
            problem=StartupProblem.WRONG_MODEL,
            expected=slot.model.name,
            found=found.name,
        )


def inspect(bus: DynamixelBus, slot: ServoSlot, log: logging.Logger) -> ServoReport:
    """Read the settings start-up checks, for one identified servo.

    Raises:
        StartupError: not in a position mode, or status return level 0.
    """
    spec = slot.units.spec
    m = slot.model
    # One read covers model number .. the mode: Operating Mode (X series: 0..11), Control
    # Mode (XL-320: 0..11), or the angle limits (1.0: 0..9).
    mode = next(n for n in (N.OPERATING_MODE, N.CONTROL_MODE, N.CCW_ANGLE_LIMIT) if m.has(n))
    end = m.register(mode).end
    srl = m.register(N.STATUS_RETURN_LEVEL)
    try:
        eeprom, _ = bus.read(spec.id, 0, end)
    except CommTimeout:
        # It answered the ping (always answered) but not a read: Status Return Level 0.
        raise StartupError(
            f"servo {spec.id} answers ping but not reads: its Status Return Level (address "
            f"{srl.address}) is probably 0; set it to 2 (or 1)",
            servo_id=spec.id,
            problem=StartupProblem.NO_STATUS_RETURN,
            expected=2,
            found=0,
        ) from None
    firmware = _value(slot, eeprom, 0, N.FIRMWARE_VERSION)
    rdt = _value(slot, eeprom, 0, N.RETURN_DELAY_TIME)
    _check_mode(slot, eeprom)
    if rdt:
        log.warning(
            "servo %d: Return Delay Time is %d µs (register value %d); every reply waits that "
            "long. Set it to 0: hilbot servo --port %s --id %d --return-delay 0",
            spec.id,
            2 * rdt,
            rdt,
            bus.port_name,
            spec.id,
        )
    return ServoReport(spec.id, m.name, firmware, rdt, hardware_status(bus, slot))


def _check_mode(slot: ServoSlot, eeprom: bytes) -> None:
    spec = slot.units.spec
    if slot.model.has(N.CONTROL_MODE):
        mode = _value(slot, eeprom, 0, N.CONTROL_MODE)
        if mode != XL320_JOINT:
            raise StartupError(
                f"servo {spec.id} (joint {spec.joint!r}) is in wheel mode (Control Mode {mode}); "
                f"hilbot commands positions: set Control Mode (address 11) to {XL320_JOINT} "
                "(joint) with torque off",
                servo_id=spec.id,
                problem=StartupProblem.WRONG_MODE,
                expected="joint",
                found="wheel",
            )
        return
    if slot.model.has(N.OPERATING_MODE):
        mode = _value(slot, eeprom, 0, N.OPERATING_MODE)
        if mode not in POSITION_MODES:
            name = OperatingMode(mode).name if mode in set(OperatingMode) else str(mode)
            raise StartupError(
                f"servo {spec.id} (joint {spec.joint!r}) is in operating mode {name} ({mode}); "
                "hilbot commands positions: set Operating Mode (address 11) to 3 (position) "
                "with torque off",
                servo_id=spec.id,
                problem=StartupProblem.WRONG_MODE,
                expected=OperatingMode.POSITION,
                found=mode,
            )
        return
    cw = _value(slot, eeprom, 0, N.CW_ANGLE_LIMIT)
    ccw = _value(slot, eeprom, 0, N.CCW_ANGLE_LIMIT)
    if cw == 0 and ccw == 0:
        raise StartupError(
            f"servo {spec.id} (joint {spec.joint!r}) is in wheel mode (both angle limits 0); "
            f"set CCW Angle Limit (address 8) to {slot.model.position_max} for joint mode",
            servo_id=spec.id,
            problem=StartupProblem.WRONG_MODE,
            expected="joint",
            found="wheel",
        )


def patient_ping(bus: DynamixelBus, servo_id: int) -> int | None:
    """Ping until the servo answers or ``PING_PATIENCE`` runs out; its model number or None."""
    deadline = time.monotonic() + PING_PATIENCE
    while True:
        try:
            return bus.ping(servo_id)
        except (CommTimeout, CrcError):
            if time.monotonic() + PING_PAUSE > deadline:
                return None
        time.sleep(PING_PAUSE)


def hardware_status(bus: DynamixelBus, slot: ServoSlot) -> HardwareErrorFlags:
    """The servo's latched hardware-error status.

    Protocol 2.0 has a register for it (its bits the model's); Protocol 1.0 reports the
    same bits in every status packet's ERR byte, so a 1-byte read's ERR is used.
    """
    if slot.model.has(N.HARDWARE_ERROR_STATUS):
        reg = slot.model.register(N.HARDWARE_ERROR_STATUS)
        data, _ = bus.read(slot.id, reg.address, 1)
        return slot.model.hardware_errors(reg.decode(data))
    _, error = bus.read(slot.id, slot.model.register(N.PRESENT_TEMPERATURE).address, 1)
    return hardware_flags_from_protocol1(error)


def check_bus(bus: DynamixelBus, layout: BusLayout, log: logging.Logger) -> list[ServoReport]:
    """Identify and inspect every servo of ``layout``; set the bus's reply timing."""
    for slot in layout.slots:
        identify(bus, slot)
    reports = [inspect(bus, slot, log) for slot in layout.slots]
    bus.set_return_delay(max(r.return_delay_time for r in reports))
    for r in reports:
        if r.hardware_errors:
            log.warning(
                "servo %d reports a hardware error at start-up: %s; reboot it once the cause "
                "is fixed",
                r.id,
                r.hardware_errors.describe(),
            )
    return reports


@dataclass(frozen=True, slots=True)
class ServoLimits:
    """The limit registers of one servo, as start-up read them (raw register values).

    Attributes:
        id: the servo.
        low: the lowest goal position [ticks] the firmware accepts.
        high: the highest.
        low_register: the register that sets ``low`` (Min Position Limit, CW Angle Limit).
        high_register: the register that sets ``high``.
        enforced: the firmware applies ``low``/``high`` in the servo's operating mode.
        pwm_limit: PWM Limit, or ``None`` where the model has none (1.0).
        current_limit: Current Limit, or ``None``.
        velocity_limit: Velocity Limit, or ``None``.
        mode: Operating Mode (2.0), or ``None``.
    """

    id: int
    low: int
    high: int
    low_register: Register
    high_register: Register
    enforced: bool
    pwm_limit: int | None = None
    current_limit: int | None = None
    velocity_limit: int | None = None
    mode: int | None = None

    def bounds(self) -> tuple[int, int] | None:
        """``(low, high)`` goal ticks where the firmware enforces them, else ``None``."""
        return (self.low, self.high) if self.enforced else None


#: ``hilbot servo`` option of each register it can set, per register name.
SERVO_OPTIONS = {
    N.MIN_POSITION_LIMIT: "--min-position-limit",
    N.MAX_POSITION_LIMIT: "--max-position-limit",
    N.CW_ANGLE_LIMIT: "--min-position-limit",
    N.CCW_ANGLE_LIMIT: "--max-position-limit",
    N.PWM_LIMIT: "--pwm-limit",
    N.CURRENT_LIMIT: "--current-limit",
}


def servo_command(bus: DynamixelBus, servo_id: int, register: RegisterName, value: int) -> str:
    """The ``hilbot servo`` command line that sets ``register`` of a servo to ``value``."""
    return (
        f"hilbot servo --port {bus.port_name} --baud {bus.baudrate} --protocol {bus.protocol} "
        f"--id {servo_id} {SERVO_OPTIONS[register]} {value}"
    )


def read_limits(bus: DynamixelBus, slot: ServoSlot) -> ServoLimits:
    """Read a servo's limit registers (and, on 2.0, its operating mode) in one read.

    Raises:
        CommTimeout, CrcError, ServoError: the read failed.
    """
    m = slot.model
    if N.OPERATING_MODE not in m.table:  # 1.0 tables and the XL-320
        low, high = m.register(N.CW_ANGLE_LIMIT), m.register(N.CCW_ANGLE_LIMIT)
        data, _ = bus.read(slot.id, low.address, high.end - low.address)
        # joint mode: both limits 0 is wheel mode, which start-up refuses before this
        base = low.address
        return ServoLimits(
            slot.id, _at(low, data, base), _at(high, data, base), low, high, enforced=True
        )
    start = m.register(N.OPERATING_MODE).address
    low, high = m.register(N.MIN_POSITION_LIMIT), m.register(N.MAX_POSITION_LIMIT)
    data, _ = bus.read(slot.id, start, low.end - start)

    def get(name: RegisterName) -> int | None:
        reg = m.table.get(name)
        return None if reg is None else _at(reg, data, start)

    mode = get(N.OPERATING_MODE)
    return ServoLimits(
        slot.id,
        _at(low, data, start),
        _at(high, data, start),
        low,
        high,
        enforced=mode == OperatingMode.POSITION,
        pwm_limit=get(N.PWM_LIMIT),
        current_limit=get(N.CURRENT_LIMIT),
        velocity_limit=get(N.VELOCITY_LIMIT),
        mode=mode,
    )


def _at(reg: Register, data: bytes, base: int) -> int:
    return reg.decode(data[reg.address - base : reg.end - base])


def check_torque(bus: DynamixelBus, slot: ServoSlot, limits: ServoLimits) -> None:
    """Refuse a servo whose limits leave its motor no torque (PWM or Current Limit 0).

    Raises:
        ServoLimitError: the register, its value, and the command that fixes it.
    """
    m = slot.model
    if limits.pwm_limit == 0:
        _refuse_torque(bus, slot, N.PWM_LIMIT, m.register(N.PWM_LIMIT).default or 885)
    if limits.mode == OperatingMode.CURRENT_BASED_POSITION and limits.current_limit == 0:
        reg = m.register(N.CURRENT_LIMIT)
        _refuse_torque(bus, slot, N.CURRENT_LIMIT, reg.default or reg.max)


def _refuse_torque(bus: DynamixelBus, slot: ServoSlot, name: RegisterName, fix: int) -> None:
    reg = slot.model.register(name)
    command = servo_command(bus, slot.id, name, fix)
    raise ServoLimitError(
        f"servo {slot.id} (joint {slot.units.spec.joint!r}, {slot.model.name}): its "
        f"{name.value} ({reg.address}) is 0, so the motor gets no "
        f"{'current' if name is N.CURRENT_LIMIT else 'voltage'} and cannot hold or move; "
        f"set it (with torque off): {command}",
        servo_id=slot.id,
        register=name.value,
        address=reg.address,
        expected=fix,
        found=0,
        command=command,
        problem=StartupProblem.NO_TORQUE,
    )


def check_joint_range(
    bus: DynamixelBus, slot: ServoSlot, limits: ServoLimits, joint_range: tuple[float, float]
) -> None:
    """Refuse joint limits that, mapped to this servo's ticks, pass its position limits.

    Args:
        bus: for the fix command (port, baud rate, protocol).
        slot: the servo (its offset, direction and gear ratio map joint to ticks).
        limits: what :func:`read_limits` found.
        joint_range: ``(lower, upper)`` joint limits the safety layer enforces [rad or m].

    Raises:
        ServoLimitError: naming the servo, the register, its value, the tick the config
            needs and the command that sets it.
    """
    if not limits.enforced:
        return
    units, m = slot.units, slot.model
    spec = units.spec
    scale = spec.direction * m.radians_per_tick / spec.gear_ratio
    lower, upper = joint_range
    ends = {
        lower: round(m.center_tick + (lower - spec.offset) / scale),
        upper: round(m.center_tick + (upper - spec.offset) / scale),
    }
    for joint_value, tick in ends.items():
        if tick < limits.low:
            _refuse_range(
                bus, slot, limits.low_register, limits.low, tick, joint_value, lower, upper
            )
        if tick > limits.high:
            _refuse_range(
                bus, slot, limits.high_register, limits.high, tick, joint_value, lower, upper
            )


def _refuse_range(
    bus: DynamixelBus,
    slot: ServoSlot,
    reg: Register,
    found: int,
    needed: int,
    joint_value: float,
    lower: float,
    upper: float,
) -> None:
    spec = slot.units.spec
    side = "lower" if joint_value == lower else "upper"
    command = servo_command(bus, slot.id, reg.name, needed)
    raise ServoLimitError(
        f"servo {slot.id} (joint {spec.joint!r}, {slot.model.name}): its {reg.name.value} "
        f"({reg.address}) is {found}, but the joint's {side} limit {joint_value:.4f} "
        f"(limits [{lower:.4f}, {upper:.4f}], offset {spec.offset}, direction "
        f"{spec.direction}, gear ratio {spec.gear_ratio}) needs tick {needed}; the servo "
        f"would refuse those goals. Set the register (with torque off): {command}, or "
        "narrow the joint with safety.soft_limits",
        servo_id=slot.id,
        register=reg.name.value,
        address=reg.address,
        expected=needed,
        found=found,
        command=command,
    )


#: Config mode names -> Operating Mode values.
MODES = {
    "position": OperatingMode.POSITION,
    "extended_position": OperatingMode.EXTENDED_POSITION,
    "current_position": OperatingMode.CURRENT_BASED_POSITION,
}
#: Profile Acceleration unit of the X series, 214.577 rev/min² (e-manual, address 108).
ACCELERATION_UNIT = 214.577 * 2.0 * math.pi / 3600.0  # [rad/s²]


def _read(bus: DynamixelBus, slot: ServoSlot, name: RegisterName) -> int:
    reg = slot.model.register(name)
    return reg.decode(bus.read(slot.id, reg.address, reg.size)[0])


def _refuse(slot: ServoSlot, message: str, expected: object = None) -> StartupError:
    return StartupError(
        f"servo {slot.id} (joint {slot.units.spec.joint!r}, {slot.model.name}): {message}",
        servo_id=slot.id,
        problem=StartupProblem.WRONG_MODE,
        expected=expected,
    )


def _require(slot: ServoSlot, name: RegisterName) -> None:
    """Refuse a config setting for a register the servo's model does not have."""
    if name not in slot.model.table:
        raise _refuse(slot, f"this model has no {name.value} register for the config's setting")


def _write(bus: DynamixelBus, slot: ServoSlot, name: RegisterName, value: int) -> None:
    _require(slot, name)
    reg = slot.model.register(name)
    if not reg.min <= value <= reg.max:
        raise _refuse(slot, f"{name.value} {value} is outside {reg.min}..{reg.max}")
    bus.write(slot.id, reg.address, reg.encode(value))
    back = _read(bus, slot, name)
    if back != value:
        raise _refuse(slot, f"{name.value} reads {back} after writing {value}", value)


def _eeprom(bus: DynamixelBus, slot: ServoSlot, name: RegisterName, value: int) -> None:
    """Write an EEPROM setting if it differs; that needs torque off."""
    _require(slot, name)  # before reading it
    if _read(bus, slot, name) == value:
        return
    if _read(bus, slot, N.TORQUE_ENABLE):
        raise _refuse(
            slot,
            f"{name.value} must become {value}, which needs torque off; it is on "
            "(power-cycle the servo or turn its torque off first)",
            value,
        )
    _write(bus, slot, name, value)


def configure(bus: DynamixelBus, slot: ServoSlot, log: logging.Logger) -> None:
    """Write one servo's configured mode, current limit and profiles; read them back.

    Raises:
        StartupError: a setting the model lacks, out of range, refused while torque is
            on, or read back different.
    """
    spec, model = slot.units.spec, slot.model
    if spec.mode is not None:
        mode = MODES[spec.mode]
        if model.protocol != 2 or N.OPERATING_MODE not in model.table:
            raise _refuse(slot, f"Protocol 1.0 servos have no operating mode {spec.mode}")
        if mode not in model.operating_modes:
            raise _refuse(slot, f"this model has no {spec.mode} mode", mode)
        _eeprom(bus, slot, N.OPERATING_MODE, int(mode))
    if spec.current_limit is not None:
        _require(slot, N.CURRENT_LIMIT)  # before converting amps with the model's unit
        ticks = round(spec.current_limit / model.effort_per_tick)
        _eeprom(bus, slot, N.CURRENT_LIMIT, ticks)
        if N.GOAL_CURRENT in model.table:
            _write(bus, slot, N.GOAL_CURRENT, ticks)
    if spec.profile_velocity is not None:
        value = round(spec.profile_velocity / model.rad_per_s_per_velocity_tick)
        _write(bus, slot, N.PROFILE_VELOCITY, value)
    if spec.profile_acceleration is not None:
        _write(
            bus, slot, N.PROFILE_ACCELERATION, round(spec.profile_acceleration / ACCELERATION_UNIT)
        )
    if spec.mode or spec.current_limit or spec.profile_velocity or spec.profile_acceleration:
        log.info("servo %d: start-up settings written and read back", slot.id)


def configure_all(bus: DynamixelBus, slots: Sequence[ServoSlot], log: logging.Logger) -> None:
    """:func:`configure` every servo."""
    for slot in slots:
        configure(bus, slot, log)
