"""The servo's own limits: read at start-up, checked against the config, enforced on goals.

A servo refuses a goal outside its limit registers (Data Limit Error on Protocol 2.0,
Angle Limit Error on 1.0). A sync write has no reply, so such a goal would be dropped
unseen and the joint would stop following; the backend therefore reads the limits once
and checks them twice:

* at start-up, the config's joint limits (after offset, direction and gear ratio) must
  lie inside each servo's position limits, or the backend refuses to start
  (:class:`~hilbot.hal.errors.ServoLimitError` names the servo, the register, both values
  and the ``hilbot servo`` command that changes it);
* at run time, a goal outside them is refused before it goes out
  (:class:`~hilbot.hal.errors.DataLimitError`, counted in ``BusCounters.data_limit_errors``),
  never clamped.

Which registers (ROBOTIS e-manual, e.g. https://emanual.robotis.com/docs/en/dxl/x/xm430-w350/):

* Protocol 2.0: Goal Position is bounded by Min / Max Position Limit (52 / 48) in
  Position Control Mode (3) only; Extended Position (4) and Current-based Position (5)
  do not use them. The motor's output is bounded by PWM Limit (36) in every mode, and
  in Current-based Position mode by Current Limit (38): 0 in either leaves no torque.
* Protocol 1.0 (joint mode): Goal Position is bounded by CW / CCW Angle Limit (6 / 8).
"""

from __future__ import annotations

from dataclasses import dataclass

from hilbot.hal.dynamixel.bus import DynamixelBus
from hilbot.hal.dynamixel.layout import ServoSlot
from hilbot.hal.dynamixel.tables import OperatingMode, Register, RegisterName
from hilbot.hal.errors import ServoLimitError, StartupProblem

N = RegisterName


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
