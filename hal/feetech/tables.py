"""Feetech memory tables and model specifications, as data.

Each model's table is its series' layout (STS: magnetic encoder, 12 bits, words low
byte first; SCS: potentiometer, 10 bits, words high byte first) filled with the
defaults and ranges of that model's memory table. Sources, per series:

- STS: Feetech's STS memory table ("FT-SMS-STS-emanual", doc.feetech.cn; the
  STS3215 column: firmware 3.6, servo version 9.3 = model number 777), cross-checked
  against LeRobot's ``lerobot/motors/feetech/tables.py`` (addresses, sizes, model
  numbers, sign bits) and rustypot's ``src/servo/feetech/sts3215.rs``;
- SCS: Feetech's SCS memory table ("FD1.9.8 SCS series memory table analysis",
  "FT-SCSCL-emanual"), cross-checked against LeRobot's ``SCS_SERIES_CONTROL_TABLE``
  and rustypot's ``scs0009.rs`` (big-endian words, no sync read).

Where a source is silent or the sources disagree, the model's ``unsourced`` says so
and what was used. Register types are the family-neutral ones of
``hilbot.hal.registers``; a register's ``byte_order`` is its series' word order.

Firmware facts the tables carry as data, for the virtual bus and the backend:

- Goal Position's dependent range is Min/Max Angle Limit in position mode (0). The
  firmware does not refuse a goal beyond it: it clamps the goal to the limits (and
  with both limits 0, multi-turn, it does not limit at all);
- EEPROM writes are gated by Lock (55 on STS, 48 on SCS): with Lock 1 a write to an
  EEPROM register takes effect but is not saved (lost at power-off); with Lock 0 it
  is saved (memory table, "Lock flag");
- Torque Limit (48, STS; RAM, 0 ~ 1000 = 0 ~ 100 % of the maximum torque) is loaded from
  Max Torque (16, EEPROM) at power-up; a write to it takes effect at once ("can be
  modified by the user to control the output of the maximum torque") and is lost at the
  next power-up. The SCS table has no Torque Limit (its Lock is at 48).
"""

from __future__ import annotations

import enum
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import cast

from hilbot.hal.errors import CommandError, ConfigError
from hilbot.hal.feetech.protocol import StatusError
from hilbot.hal.mapping import BusSpec, ServoSpec
from hilbot.hal.registers import (
    Access,
    Area,
    Bound,
    DependentRange,
    Encoding,
    Register,
    named_table,
)


class FeetechRegister(enum.Enum):
    """Memory-table items of the STS and SCS series."""

    FIRMWARE_MAJOR_VERSION = "Firmware Major Version"
    FIRMWARE_MINOR_VERSION = "Firmware Minor Version"
    END = "END"  # byte order of the table: 0 little-endian (STS), 1 big-endian (SCS)
    MODEL_NUMBER = "Model Number"  # "Servo Major/Minor Version", addresses 3 and 4
    ID = "ID"
    BAUD_RATE = "Baud Rate"
    RETURN_DELAY_TIME = "Return Delay Time"
    RESPONSE_STATUS_LEVEL = "Response Status Level"
    MIN_ANGLE_LIMIT = "Min Angle Limit"
    MAX_ANGLE_LIMIT = "Max Angle Limit"
    MAX_TEMPERATURE_LIMIT = "Max Temperature Limit"
    MAX_INPUT_VOLTAGE = "Max Input Voltage"
    MIN_INPUT_VOLTAGE = "Min Input Voltage"
    MAX_TORQUE = "Max Torque"
    PHASE = "Phase"
    UNLOADING_CONDITION = "Unloading Condition"
    LED_ALARM_CONDITION = "LED Alarm Condition"
    P_COEFFICIENT = "P Coefficient"
    D_COEFFICIENT = "D Coefficient"
    I_COEFFICIENT = "I Coefficient"
    MINIMUM_STARTUP_FORCE = "Minimum Startup Force"
    CW_DEAD_ZONE = "CW Dead Zone"
    CCW_DEAD_ZONE = "CCW Dead Zone"
    PROTECTION_CURRENT = "Protection Current"
    ANGULAR_RESOLUTION = "Angular Resolution"
    HOMING_OFFSET = "Homing Offset"  # the table's "Position Correction" / "Ofs"
    OPERATING_MODE = "Operating Mode"
    PROTECTIVE_TORQUE = "Protective Torque"
    PROTECTION_TIME = "Protection Time"
    OVERLOAD_TORQUE = "Overload Torque"
    SPEED_P_COEFFICIENT = "Speed Closed Loop P Coefficient"
    OVER_CURRENT_PROTECTION_TIME = "Over Current Protection Time"
    SPEED_I_COEFFICIENT = "Speed Closed Loop I Coefficient"
    TORQUE_ENABLE = "Torque Enable"  # the table's "Torque Switch"
    ACCELERATION = "Acceleration"
    GOAL_POSITION = "Goal Position"
    GOAL_TIME = "Goal Time"  # "Running Time"; PWM duty in mode 2
    GOAL_SPEED = "Goal Speed"  # "Running Speed"
    TORQUE_LIMIT = "Torque Limit"
    LOCK = "Lock"
    PRESENT_POSITION = "Present Position"
    PRESENT_SPEED = "Present Speed"
    PRESENT_LOAD = "Present Load"
    PRESENT_VOLTAGE = "Present Voltage"
    PRESENT_TEMPERATURE = "Present Temperature"
    ASYNC_WRITE_FLAG = "Async Write Flag"  # set by REG WRITE until ACTION
    STATUS = "Status"
    MOVING = "Moving"
    PRESENT_CURRENT = "Present Current"
    # The factory block (STS, 80 ~ 86; "出厂参数" in the memory table).
    MOVING_SPEED_THRESHOLD = "Moving Speed Threshold"  # LeRobot: Moving_Velocity_Threshold
    DTS = "DTs"  # [ms]
    SPEED_UNIT_FACTOR = "Speed Unit Factor"  # LeRobot: Velocity_Unit_factor
    MIN_SPEED_LIMIT = "Min Speed Limit"  # LeRobot: Hts (ns)
    MAX_SPEED_LIMIT = "Max Speed Limit"  # LeRobot: Maximum_Velocity_Limit
    ACCELERATION_LIMIT = "Acceleration Limit"  # LeRobot: Maximum_Acceleration
    ACCELERATION_MULTIPLIER = "Acceleration Multiplier"


class WordOrder(enum.Enum):
    """Byte order of a Feetech series' multi-byte registers."""

    LITTLE = "little"  # STS / SMS: low byte at the lower address
    BIG = "big"  # SCS: high byte at the lower address


#: Sign bit of the sign-magnitude registers, by the manual's description.
HOMING_OFFSET_SIGN_BIT = 11
SPEED_SIGN_BIT = 15
POSITION_SIGN_BIT = 15
LOAD_SIGN_BIT = 10


def sign_magnitude_decode(raw: int, sign_bit: int) -> int:
    """The signed value of ``raw`` with its sign in ``sign_bit``.

    Bits above the sign bit are ignored, as the firmware ignores them.
    """
    if raw < 0:
        raise ValueError(f"raw register value must be >= 0, got {raw}")
    magnitude = raw & ((1 << sign_bit) - 1)
    return -magnitude if raw >> sign_bit & 1 else magnitude


def sign_magnitude_encode(value: int, sign_bit: int) -> int:
    """The raw form of ``value`` with its sign in ``sign_bit``.

    Raises:
        ValueError: ``|value|`` does not fit below the sign bit.
    """
    limit = (1 << sign_bit) - 1
    if abs(value) > limit:
        raise ValueError(
            f"{value} does not fit a sign-magnitude value with the sign in bit {sign_bit} "
            f"(|value| <= {limit})"
        )
    return abs(value) | (1 << sign_bit) if value < 0 else value


def word_to_bytes(value: int, size: int, order: WordOrder) -> bytes:
    """The ``size`` bytes of unsigned ``value`` in ``order``."""
    return int(value).to_bytes(size, order.value)


def word_from_bytes(data: bytes, order: WordOrder) -> int:
    """The unsigned value of ``data`` in ``order``."""
    return int.from_bytes(data, order.value)


__all__ = [
    "MODELS",
    "FeetechModel",
    "FeetechRegister",
    "Series",
    "model",
    "models_with_number",
]

N = FeetechRegister
R, RW = Access.R, Access.RW
EEPROM, RAM = Area.EEPROM, Area.RAM

#: Operating Mode values (memory table, address 33).
POSITION_MODE, SPEED_MODE, PWM_MODE, STEP_MODE = 0, 1, 2, 3
#: Torque Enable values: off, on, damping; 128 sets the present position to 2048.
TORQUE_VALUES = frozenset({0, 1, 2, 128})
TORQUE_CALIBRATE = 128
#: Max Torque and Torque Limit value of 100 % of the maximum torque ("1000 = 100% * locked
#: torque", memory table, address 16); Present Load counts in the same 0.1 % steps.
TORQUE_FULL_SCALE = 1000

#: Baud Rate register value -> bit/s (STS and SCS memory tables; FTServo ``INST.h``).
#: LeRobot's table lists 5: 57600, 6: 38400, 7: 19200 instead; Feetech's own tables
#: (both series) and its Arduino library give 76800, 57600 and 38400.
BAUD_RATES: Mapping[int, int] = MappingProxyType(
    {
        0: 1_000_000,
        1: 500_000,
        2: 250_000,
        3: 128_000,
        4: 115_200,
        5: 76_800,
        6: 57_600,
        7: 38_400,
    }
)


class Series(enum.Enum):
    """A Feetech series: its word order and its status bits."""

    STS = "STS"
    SCS = "SCS"


@dataclass(frozen=True, slots=True)
class FeetechModel:
    """One Feetech servo model.

    Args:
        name: e.g. ``"STS3215"``.
        series: STS or SCS.
        model_number: what addresses 3 and 4 read (the servo's major, minor version).
        table: the memory table by register name.
        ticks_per_rev: encoder steps per revolution (SCS: 1024 steps over 300°).
        position_max: highest position step (STS 4095, SCS 1023).
        center_tick: the middle step (joint zero reference).
        nominal_voltage: [V].
        has_sync_read: whether the firmware answers SYNC READ (0x82).
        source: where the values come from.
        unsourced: what the sources leave open, and what was used.
    """

    name: str
    series: Series
    model_number: int
    table: Mapping[FeetechRegister, Register]
    ticks_per_rev: float
    position_max: int
    center_tick: int
    nominal_voltage: float
    has_sync_read: bool
    source: str
    unsourced: tuple[str, ...] = ()
    baud_rates: Mapping[int, int] = field(default_factory=lambda: BAUD_RATES)

    @property
    def word_order(self) -> WordOrder:
        """Byte order of the model's words."""
        return WordOrder.LITTLE if self.series is Series.STS else WordOrder.BIG

    @property
    def status_bits(self) -> StatusError:
        """The status bits this series reports (SCS: no angle sensor, no current)."""
        bits = StatusError.VOLTAGE | StatusError.OVERHEAT | StatusError.OVERLOAD
        if self.series is Series.STS:
            bits |= StatusError.ANGLE_SENSOR | StatusError.OVERCURRENT
        return bits

    @property
    def radians_per_tick(self) -> float:
        """Position (and speed, per second) unit [rad]."""
        return 2.0 * math.pi / self.ticks_per_rev

    @property
    def lock_register(self) -> Register:
        """The Lock register (55 on STS, 48 on SCS)."""
        return self.table[N.LOCK]

    def register(self, name: FeetechRegister) -> Register:
        """The register ``name``; ``KeyError`` naming the model when it has none."""
        try:
            return self.table[name]
        except KeyError:
            raise KeyError(f"{self.name} has no {name.value} register") from None

    def baud_value(self, baudrate: int) -> int:
        """Baud Rate register value for ``baudrate`` [bit/s]; ``ValueError`` if none."""
        for value, rate in self.baud_rates.items():
            if rate == baudrate:
                return value
        rates = ", ".join(str(r) for r in self.baud_rates.values())
        raise ValueError(f"{self.name} cannot use {baudrate} bit/s; it supports {rates}")


# ---------------------------------------------------------------------- layouts


def _reg(
    name: FeetechRegister,
    address: int,
    size: int,
    access: Access,
    area: Area,
    default: int = 0,
    low: int = 0,
    high: int = 0,
    *,
    unit: str = "",
    encoding: Encoding = Encoding.UNSIGNED,
    dependent: tuple[DependentRange, ...] = (),
    values: frozenset[int] = frozenset(),
) -> Register:
    return Register(
        name,
        address,
        size,
        access,
        area,
        unit=unit,
        min=low,
        max=high,
        encoding=encoding,
        default=default,
        dependent=dependent,
        values=values,
    )


#: Goal Position within Min/Max Angle Limit in position mode (clamped by the firmware).
_GOAL_LIMITS = (
    DependentRange(Bound(N.MIN_ANGLE_LIMIT), Bound(N.MAX_ANGLE_LIMIT), frozenset({POSITION_MODE})),
)

SM10, SM11, SM15 = (
    Encoding.SIGN_MAGNITUDE_10,
    Encoding.SIGN_MAGNITUDE_11,
    Encoding.SIGN_MAGNITUDE_15,
)


def _sts_registers(d: Mapping[FeetechRegister, int]) -> list[Register]:
    """The STS layout with defaults ``d`` (STS memory table, STS3215 column)."""
    return [
        _reg(N.FIRMWARE_MAJOR_VERSION, 0, 1, R, EEPROM, d[N.FIRMWARE_MAJOR_VERSION]),
        _reg(N.FIRMWARE_MINOR_VERSION, 1, 1, R, EEPROM, d[N.FIRMWARE_MINOR_VERSION]),
        _reg(N.END, 2, 1, R, EEPROM, 0),
        _reg(N.MODEL_NUMBER, 3, 2, R, EEPROM, d[N.MODEL_NUMBER]),
        _reg(N.ID, 5, 1, RW, EEPROM, 1, 0, 253),
        _reg(N.BAUD_RATE, 6, 1, RW, EEPROM, 0, 0, 7),
        _reg(N.RETURN_DELAY_TIME, 7, 1, RW, EEPROM, 0, 0, 254, unit="2 µs"),
        _reg(N.RESPONSE_STATUS_LEVEL, 8, 1, RW, EEPROM, 1, 0, 1),
        _reg(N.MIN_ANGLE_LIMIT, 9, 2, RW, EEPROM, 0, 0, 4094, unit="step"),
        _reg(N.MAX_ANGLE_LIMIT, 11, 2, RW, EEPROM, 4095, 0, 4095, unit="step"),
        _reg(
            N.MAX_TEMPERATURE_LIMIT,
            13,
            1,
            RW,
            EEPROM,
            d[N.MAX_TEMPERATURE_LIMIT],
            0,
            100,
            unit="°C",
        ),
        _reg(N.MAX_INPUT_VOLTAGE, 14, 1, RW, EEPROM, d[N.MAX_INPUT_VOLTAGE], 0, 254, unit="0.1 V"),
        _reg(N.MIN_INPUT_VOLTAGE, 15, 1, RW, EEPROM, d[N.MIN_INPUT_VOLTAGE], 0, 254, unit="0.1 V"),
        _reg(N.MAX_TORQUE, 16, 2, RW, EEPROM, 1000, 0, 1000, unit="0.1 %"),
        _reg(N.PHASE, 18, 1, RW, EEPROM, 12, 0, 254),
        _reg(N.UNLOADING_CONDITION, 19, 1, RW, EEPROM, 44, 0, 254),
        _reg(N.LED_ALARM_CONDITION, 20, 1, RW, EEPROM, 47, 0, 254),
        _reg(N.P_COEFFICIENT, 21, 1, RW, EEPROM, d[N.P_COEFFICIENT], 0, 254),
        _reg(N.D_COEFFICIENT, 22, 1, RW, EEPROM, d[N.D_COEFFICIENT], 0, 254),
        _reg(N.I_COEFFICIENT, 23, 1, RW, EEPROM, 0, 0, 254),
        _reg(N.MINIMUM_STARTUP_FORCE, 24, 2, RW, EEPROM, 16, 0, 1000, unit="0.1 %"),
        _reg(N.CW_DEAD_ZONE, 26, 1, RW, EEPROM, 1, 0, 32, unit="step"),
        _reg(N.CCW_DEAD_ZONE, 27, 1, RW, EEPROM, 1, 0, 32, unit="step"),
        _reg(N.PROTECTION_CURRENT, 28, 2, RW, EEPROM, 500, 0, 511, unit="6.5 mA"),
        _reg(N.ANGULAR_RESOLUTION, 30, 1, RW, EEPROM, 1, 1, 100),
        _reg(N.HOMING_OFFSET, 31, 2, RW, EEPROM, 0, -2047, 2047, unit="step", encoding=SM11),
        _reg(N.OPERATING_MODE, 33, 1, RW, EEPROM, 0, 0, 3),
        _reg(N.PROTECTIVE_TORQUE, 34, 1, RW, EEPROM, 20, 0, 254, unit="1 %"),
        _reg(N.PROTECTION_TIME, 35, 1, RW, EEPROM, 200, 0, 254, unit="10 ms"),
        _reg(N.OVERLOAD_TORQUE, 36, 1, RW, EEPROM, 80, 0, 254, unit="1 %"),
        _reg(N.SPEED_P_COEFFICIENT, 37, 1, RW, EEPROM, 10, 0, 254),
        _reg(N.OVER_CURRENT_PROTECTION_TIME, 38, 1, RW, EEPROM, 200, 0, 254, unit="10 ms"),
        _reg(N.SPEED_I_COEFFICIENT, 39, 1, RW, EEPROM, 10, 0, 254),
        _reg(N.TORQUE_ENABLE, 40, 1, RW, RAM, 0, 0, 128, values=TORQUE_VALUES),
        _reg(N.ACCELERATION, 41, 1, RW, RAM, 0, 0, 254, unit="100 step/s²"),
        _reg(
            N.GOAL_POSITION,
            42,
            2,
            RW,
            RAM,
            0,
            -32766,
            32766,
            unit="step",
            encoding=SM15,
            dependent=_GOAL_LIMITS,
        ),
        _reg(N.GOAL_TIME, 44, 2, RW, RAM, 0, unit="ms"),
        _reg(N.GOAL_SPEED, 46, 2, RW, RAM, 0, -32766, 32766, unit="step/s", encoding=SM15),
        _reg(N.TORQUE_LIMIT, 48, 2, RW, RAM, 1000, 0, 1000, unit="0.1 %"),
        _reg(N.LOCK, 55, 1, RW, RAM, d[N.LOCK], 0, 1),
        _reg(N.PRESENT_POSITION, 56, 2, R, RAM, unit="step", encoding=SM15),
        _reg(N.PRESENT_SPEED, 58, 2, R, RAM, unit="step/s", encoding=SM15),
        _reg(N.PRESENT_LOAD, 60, 2, R, RAM, unit="0.1 %", encoding=SM10),
        _reg(N.PRESENT_VOLTAGE, 62, 1, R, RAM, unit="0.1 V"),
        _reg(N.PRESENT_TEMPERATURE, 63, 1, R, RAM, unit="°C"),
        _reg(N.ASYNC_WRITE_FLAG, 64, 1, R, RAM),
        _reg(N.STATUS, 65, 1, R, RAM),
        _reg(N.MOVING, 66, 1, R, RAM),
        _reg(N.PRESENT_CURRENT, 69, 2, R, RAM, unit="6.5 mA"),
        # The factory block: one byte each, saved like EEPROM (Lock 0) and read back.
        _reg(N.MOVING_SPEED_THRESHOLD, 80, 1, RW, EEPROM, 0, 0, 254),
        _reg(N.DTS, 81, 1, RW, EEPROM, 0, 0, 254, unit="ms"),
        _reg(N.SPEED_UNIT_FACTOR, 82, 1, RW, EEPROM, 0, 0, 254),
        _reg(N.MIN_SPEED_LIMIT, 83, 1, RW, EEPROM, 0, 0, 254, unit="0.732 rpm"),
        _reg(N.MAX_SPEED_LIMIT, 84, 1, RW, EEPROM, 0, 0, 254, unit="0.732 rpm"),
        _reg(N.ACCELERATION_LIMIT, 85, 1, RW, EEPROM, 0, 0, 254),
        _reg(N.ACCELERATION_MULTIPLIER, 86, 1, RW, EEPROM, 0, 0, 254),
    ]


def _scs_registers(d: Mapping[FeetechRegister, int]) -> list[Register]:
    """The SCS layout with defaults ``d`` (SCS memory table); words are big-endian."""
    regs = [
        _reg(N.FIRMWARE_MAJOR_VERSION, 0, 1, R, EEPROM, d[N.FIRMWARE_MAJOR_VERSION]),
        _reg(N.FIRMWARE_MINOR_VERSION, 1, 1, R, EEPROM, d[N.FIRMWARE_MINOR_VERSION]),
        _reg(N.END, 2, 1, R, EEPROM, 1),
        _reg(N.MODEL_NUMBER, 3, 2, R, EEPROM, d[N.MODEL_NUMBER]),
        _reg(N.ID, 5, 1, RW, EEPROM, 1, 0, 253),
        _reg(N.BAUD_RATE, 6, 1, RW, EEPROM, 0, 0, 7),
        _reg(N.RETURN_DELAY_TIME, 7, 1, RW, EEPROM, 0, 0, 254, unit="2 µs"),
        _reg(N.RESPONSE_STATUS_LEVEL, 8, 1, RW, EEPROM, 1, 0, 1),
        _reg(N.MIN_ANGLE_LIMIT, 9, 2, RW, EEPROM, d[N.MIN_ANGLE_LIMIT], 0, 1023, unit="step"),
        _reg(N.MAX_ANGLE_LIMIT, 11, 2, RW, EEPROM, d[N.MAX_ANGLE_LIMIT], 0, 1023, unit="step"),
        _reg(
            N.MAX_TEMPERATURE_LIMIT,
            13,
            1,
            RW,
            EEPROM,
            d[N.MAX_TEMPERATURE_LIMIT],
            0,
            100,
            unit="°C",
        ),
        _reg(N.MAX_INPUT_VOLTAGE, 14, 1, RW, EEPROM, d[N.MAX_INPUT_VOLTAGE], 0, 254, unit="0.1 V"),
        _reg(N.MIN_INPUT_VOLTAGE, 15, 1, RW, EEPROM, d[N.MIN_INPUT_VOLTAGE], 0, 254, unit="0.1 V"),
        _reg(N.MAX_TORQUE, 16, 2, RW, EEPROM, 1000, 0, 1000, unit="0.1 %"),
        _reg(N.PHASE, 18, 1, RW, EEPROM, 0, 0, 254),
        _reg(N.UNLOADING_CONDITION, 19, 1, RW, EEPROM, 36, 0, 254),
        _reg(N.LED_ALARM_CONDITION, 20, 1, RW, EEPROM, 37, 0, 254),
        _reg(N.P_COEFFICIENT, 21, 1, RW, EEPROM, d[N.P_COEFFICIENT], 0, 254),
        _reg(N.D_COEFFICIENT, 22, 1, RW, EEPROM, d[N.D_COEFFICIENT], 0, 254),
        _reg(N.I_COEFFICIENT, 23, 1, RW, EEPROM, 0, 0, 254),
        _reg(N.MINIMUM_STARTUP_FORCE, 24, 2, RW, EEPROM, 30, 0, 1000, unit="0.1 %"),
        _reg(N.CW_DEAD_ZONE, 26, 1, RW, EEPROM, 1, 0, 32, unit="step"),
        _reg(N.CCW_DEAD_ZONE, 27, 1, RW, EEPROM, 1, 0, 32, unit="step"),
        _reg(N.PROTECTIVE_TORQUE, 37, 1, RW, EEPROM, 20, 0, 254, unit="1 %"),
        _reg(N.PROTECTION_TIME, 38, 1, RW, EEPROM, 100, 0, 254, unit="40 ms"),
        _reg(N.OVERLOAD_TORQUE, 39, 1, RW, EEPROM, 80, 0, 254, unit="1 %"),
        _reg(N.TORQUE_ENABLE, 40, 1, RW, RAM, 0, 0, 2),
        _reg(N.ACCELERATION, 41, 1, RW, RAM, 0, 0, 254),
        _reg(N.GOAL_POSITION, 42, 2, RW, RAM, 0, 0, 1023, unit="step", dependent=_GOAL_LIMITS),
        _reg(N.GOAL_TIME, 44, 2, RW, RAM, 0, unit="ms"),
        _reg(N.GOAL_SPEED, 46, 2, RW, RAM, 0, unit="step/s"),
        _reg(N.LOCK, 48, 1, RW, RAM, d[N.LOCK], 0, 1),
        _reg(N.PRESENT_POSITION, 56, 2, R, RAM, unit="step"),
        _reg(N.PRESENT_SPEED, 58, 2, R, RAM, unit="step/s", encoding=SM15),
        _reg(N.PRESENT_LOAD, 60, 2, R, RAM, unit="0.1 %", encoding=SM10),
        _reg(N.PRESENT_VOLTAGE, 62, 1, R, RAM, unit="0.1 V"),
        _reg(N.PRESENT_TEMPERATURE, 63, 1, R, RAM, unit="°C"),
        _reg(N.ASYNC_WRITE_FLAG, 64, 1, R, RAM),
        _reg(N.STATUS, 65, 1, R, RAM),
        _reg(N.MOVING, 66, 1, R, RAM),
        _reg(N.PRESENT_CURRENT, 69, 2, R, RAM),
    ]
    return [_big(r) for r in regs]


def _big(reg: Register) -> Register:
    if reg.size == 1:
        return reg
    return Register(
        reg.name,
        reg.address,
        reg.size,
        reg.access,
        reg.area,
        unit=reg.unit,
        min=reg.min,
        max=reg.max,
        encoding=reg.encoding,
        default=reg.default,
        dependent=reg.dependent,
        values=reg.values,
        byte_order="big",
    )


# ---------------------------------------------------------------------- models


def _table(registers: list[Register]) -> Mapping[FeetechRegister, Register]:
    # Every register here is named by a FeetechRegister.
    return cast(Mapping[FeetechRegister, Register], named_table(registers))


_STS_SOURCE = (
    "Feetech STS memory table (FT-SMS-STS-emanual, doc.feetech.cn), STS3215 column; "
    "cross-checked: lerobot/motors/feetech/tables.py, rustypot src/servo/feetech/sts3215.rs"
)
_SCS_SOURCE = (
    "Feetech SCS memory table (FD1.9.8 SCS series memory table analysis; FT-SCSCL-emanual); "
    "cross-checked: lerobot SCS_SERIES_CONTROL_TABLE, rustypot src/servo/feetech/scs0009.rs"
)
_STS_OPEN = (
    "Lock (55) at power-up: the STS table transcription read gives 0, another gives 1; 0 used",
    "Min Angle Limit range 0 ~ 4094 and Max 1 ~ 4095 in the table; 0 accepted for both "
    "(the table says both are 0 for multi-turn)",
    "Goal Position echo (67 or 71, sources differ) is left out: it reads as zero",
    "the factory block (80 ~ 86): the memory table names it (moving speed threshold, DTs, "
    "speed unit factor, min and max speed limit, acceleration limit, acceleration "
    "multiplier) but gives neither factory values nor what the firmware does with them; "
    "here they read 0 at first power-up, take writes (0 ~ 254), are saved like EEPROM "
    "(Lock 0) and change nothing in the dynamics",
)
_STS_DEFAULTS = {
    N.FIRMWARE_MAJOR_VERSION: 3,
    N.FIRMWARE_MINOR_VERSION: 6,
    N.MAX_TEMPERATURE_LIMIT: 70,
    N.MAX_INPUT_VOLTAGE: 80,
    N.MIN_INPUT_VOLTAGE: 40,
    N.P_COEFFICIENT: 32,
    N.D_COEFFICIENT: 32,
    N.LOCK: 0,
}


def _sts(
    name: str,
    number: int,
    voltage: float,
    unsourced: tuple[str, ...] = (),
    **defaults: int,
) -> FeetechModel:
    d = {**_STS_DEFAULTS, N.MODEL_NUMBER: number}
    d.update({FeetechRegister.__members__[k]: v for k, v in defaults.items()})
    return FeetechModel(
        name=name,
        series=Series.STS,
        model_number=number,
        table=_table(_sts_registers(d)),
        ticks_per_rev=4096.0,
        position_max=4095,
        center_tick=2048,
        nominal_voltage=voltage,
        has_sync_read=True,
        source=_STS_SOURCE,
        unsourced=_STS_OPEN + unsourced,
    )


def _scs0009() -> FeetechModel:
    d = {
        N.FIRMWARE_MAJOR_VERSION: 1,
        N.FIRMWARE_MINOR_VERSION: 0,
        N.MODEL_NUMBER: 1284,
        N.MIN_ANGLE_LIMIT: 20,
        N.MAX_ANGLE_LIMIT: 1003,
        N.MAX_TEMPERATURE_LIMIT: 80,
        N.MAX_INPUT_VOLTAGE: 90,
        N.MIN_INPUT_VOLTAGE: 45,
        N.P_COEFFICIENT: 15,
        N.D_COEFFICIENT: 15,
        N.LOCK: 0,
    }
    return FeetechModel(
        name="SCS0009",
        series=Series.SCS,
        model_number=1284,
        table=_table(_scs_registers(d)),
        ticks_per_rev=1024.0 * 360.0 / 300.0,  # 1024 steps over 300°
        position_max=1023,
        center_tick=511,  # rustypot AnglePosition: 0 rad at step 511
        nominal_voltage=6.0,
        has_sync_read=False,
        source=_SCS_SOURCE,
        unsourced=(
            "defaults are the SCS series table's (SCS15 generation); an SCS0009 column "
            "was not found",
            "firmware version 1.0: not given by the sources",
            "sync read: rustypot marks SCS0009 as not supporting it; modelled so",
            "Return Delay Time (7): rustypot marks it reserved on SCS0009",
        ),
    )


#: Every model, by name. The STS3215 variants all read model number 777: the 7.4 V
#: (C001; 1/345 gear) and 12 V (C018/C047) versions differ in voltage and torque,
#: not on the bus; configs name the variant.
MODELS: Mapping[str, FeetechModel] = MappingProxyType(
    {
        m.name: m
        for m in (
            _sts("STS3215", 777, 7.4),
            _sts(
                "STS3215-12V",
                777,
                12.0,
                (
                    "Max Input Voltage default 140 (14.0 V) for the 12 V versions: not in the "
                    "STS3215 column read (80, the 7.4 V version's)",
                ),
                MAX_INPUT_VOLTAGE=140,
            ),
            _sts(
                "STS3250",
                2825,
                12.0,
                (
                    "STS3250 defaults: the STS3215 column's except Max Input Voltage 140; "
                    "model number 2825 from LeRobot's MODEL_NUMBER_TABLE",
                ),
                MAX_INPUT_VOLTAGE=140,
            ),
            _scs0009(),
        )
    }
)


def model(name: str) -> FeetechModel:
    """The model called ``name`` (case-insensitive); ``KeyError`` listing the known ones."""
    for known, spec in MODELS.items():
        if known.lower() == name.strip().lower():
            return spec
    raise KeyError(f"unknown Feetech model {name!r}; known: {', '.join(MODELS)}")


def models_with_number(number: int) -> tuple[FeetechModel, ...]:
    """Every model whose Model Number reads ``number`` (the STS3215 variants share 777)."""
    return tuple(m for m in MODELS.values() if m.model_number == number)


LOAD_PERCENT_PER_UNIT = 0.1  # [%] of max torque per Present Load unit (STS/SCS tables)
STATE_REGISTERS = (
    N.PRESENT_POSITION,
    N.PRESENT_SPEED,
    N.PRESENT_LOAD,
    N.PRESENT_VOLTAGE,
    N.PRESENT_TEMPERATURE,
)


def state_block(spec: FeetechModel) -> tuple[int, int, tuple[Register, ...]]:
    """Address, length and registers of the cycle's read block on ``spec``.

    Raises:
        ValueError: the registers are not contiguous on this model.
    """
    regs = tuple(spec.register(n) for n in STATE_REGISTERS)
    for a, b in itertools.pairwise(regs):
        if a.end != b.address:
            raise ValueError(f"{spec.name}: {a.label} and {b.label} are not contiguous")
    return regs[0].address, regs[-1].end - regs[0].address, regs


@dataclass(frozen=True, slots=True)
class FeetechUnits:
    """Conversions for one configured Feetech servo."""

    spec: ServoSpec
    model: FeetechModel

    @classmethod
    def of(cls, spec: ServoSpec) -> FeetechUnits:
        """Build from a spec, resolving its model name (``ConfigError`` if unknown)."""
        try:
            return cls(spec, model(spec.model))
        except KeyError as exc:
            raise ConfigError(str(exc.args[0]), servo_id=spec.id, field="model") from None

    @property
    def scale(self) -> float:
        """Joint units per position tick, signed by direction."""
        return self.spec.direction * self.model.radians_per_tick / self.spec.gear_ratio

    def position(self, ticks: int) -> float:
        """Joint position [rad or m] of a Present Position reading."""
        return self.spec.offset + (ticks - self.model.center_tick) * self.scale

    def exact_ticks(self, position: float) -> float:
        """The (unrounded) tick of a joint position."""
        return self.model.center_tick + (position - self.spec.offset) / self.scale

    def ticks(self, position: float) -> int:
        """Goal Position ticks for a joint position, rounded to the nearest tick.

        Raises:
            CommandError: the position is not finite or lies outside the servo's range.
        """
        exact = self.exact_ticks(position) if math.isfinite(position) else math.nan
        raw = round(exact) if math.isfinite(exact) else None
        if raw is None or not 0 <= raw <= self.model.position_max:
            lo, hi = sorted(self.position(t) for t in (0, self.model.position_max))
            raise CommandError(
                f"joint {self.spec.joint!r}: {position!r} is outside servo {self.spec.id}'s "
                f"range [{lo:.4f}, {hi:.4f}]",
                joint=self.spec.joint,
                value=position,
            )
        return int(raw)

    def velocity(self, raw: int) -> float:
        """Joint velocity [rad/s or m/s] of a Present Speed reading (steps/s)."""
        return raw * self.scale

    def effort(self, raw: int) -> float:
        """Present Load in [%] of maximum torque, signed like the joint."""
        return self.spec.direction * raw * LOAD_PERCENT_PER_UNIT


BITS_PER_BYTE = 10
RETURN_DELAY_UNIT = 2e-6  # [s] per Return Delay Time unit (memory table, address 7)
GOAL_BYTES = 2  # Goal Position (42)


@dataclass(frozen=True, slots=True)
class FeetechBudget:
    """The wire time of one read + write cycle on one Feetech bus."""

    baudrate: int
    servos: int
    sync_read: bool
    read_length: int  # [bytes] per servo
    tx_bytes: int
    rx_bytes: int
    return_delay: float  # [s] summed over one cycle's replies
    transactions: int  # round trips per cycle

    @property
    def wire_time(self) -> float:
        """[s] tx + rx bytes at 10 bits each."""
        return (self.tx_bytes + self.rx_bytes) * BITS_PER_BYTE / self.baudrate

    @property
    def cycle_time(self) -> float:
        """[s] wire time plus return delays."""
        return self.wire_time + self.return_delay

    @property
    def max_rate(self) -> float:
        """Highest cycle rate [Hz] the wire can carry."""
        return 1.0 / self.cycle_time

    def describe(self) -> str:
        """A few lines of arithmetic, for ``hilbot doctor``."""
        us = 1e6
        how = "sync read" if self.sync_read else "one read per servo"
        return (
            f"{self.servos} Feetech servos, {self.baudrate} bit/s, {how} of "
            f"{self.read_length} B + sync write of {GOAL_BYTES} B\n"
            f"  {self.tx_bytes} B out + {self.rx_bytes} B back = "
            f"{self.tx_bytes + self.rx_bytes} B x {BITS_PER_BYTE} bit = "
            f"{self.wire_time * us:.0f} µs, return delays {self.return_delay * us:.0f} µs\n"
            f"  cycle {self.cycle_time * us:.0f} µs -> at most {self.max_rate:.0f} Hz"
        )


def feetech_budget(
    bus: BusSpec, servos: Sequence[ServoSpec], *, return_delay_time: int = 0
) -> FeetechBudget:
    """The cycle budget of ``servos`` on ``bus`` (``KeyError`` for an unknown model)."""
    models = [model(s.model) for s in servos]
    length = max(state_block(m)[1] for m in models)
    n = len(servos)
    sync = all(m.has_sync_read for m in models)
    read_tx = 8 + n if sync else 8 * n
    tx = read_tx + 8 + n * (1 + GOAL_BYTES)
    rx = n * (6 + length)
    return FeetechBudget(
        baudrate=bus.baudrate,
        servos=n,
        sync_read=sync,
        read_length=length,
        tx_bytes=tx,
        rx_bytes=rx,
        return_delay=n * return_delay_time * RETURN_DELAY_UNIT,
        transactions=2 if sync else n + 1,
    )


def max_cycle_rate(
    bus: BusSpec, servos: Sequence[ServoSpec], *, return_delay_time: int = 0
) -> float:
    """Highest cycle rate [Hz] the bus can carry for ``servos`` (wire limit)."""
    if not servos:
        return float("inf")
    return feetech_budget(bus, servos, return_delay_time=return_delay_time).max_rate
