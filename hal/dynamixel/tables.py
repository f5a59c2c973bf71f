"""Dynamixel control tables and model specifications, as data.

Each table is transcribed from the ROBOTIS e-manual page named in its
``ModelSpec.url``; model numbers agree with dynamixel-sdk / DynamixelWorkbench.
Tables are keyed by :class:`RegisterName`, never by strings. A model that lacks
a register (an XL430 has no Present Current: its address 126 is Present Load)
simply does not have it in its table, and :meth:`ModelSpec.register` says so.
"""

from __future__ import annotations

import enum
import itertools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from types import MappingProxyType

from hilbot.hal.backend import EffortUnit


class RegisterName(enum.Enum):
    """Control-table items, by their e-manual names."""

    MODEL_NUMBER = "Model Number"
    MODEL_INFORMATION = "Model Information"
    FIRMWARE_VERSION = "Firmware Version"
    ID = "ID"
    BAUD_RATE = "Baud Rate"
    RETURN_DELAY_TIME = "Return Delay Time"
    DRIVE_MODE = "Drive Mode"
    OPERATING_MODE = "Operating Mode"
    SECONDARY_ID = "Secondary ID"
    PROTOCOL_TYPE = "Protocol Type"
    HOMING_OFFSET = "Homing Offset"
    MOVING_THRESHOLD = "Moving Threshold"
    TEMPERATURE_LIMIT = "Temperature Limit"
    MAX_VOLTAGE_LIMIT = "Max Voltage Limit"
    MIN_VOLTAGE_LIMIT = "Min Voltage Limit"
    PWM_LIMIT = "PWM Limit"
    CURRENT_LIMIT = "Current Limit"
    VELOCITY_LIMIT = "Velocity Limit"
    MAX_POSITION_LIMIT = "Max Position Limit"
    MIN_POSITION_LIMIT = "Min Position Limit"
    SHUTDOWN = "Shutdown"
    TORQUE_ENABLE = "Torque Enable"
    LED = "LED"
    STATUS_RETURN_LEVEL = "Status Return Level"
    REGISTERED_INSTRUCTION = "Registered Instruction"
    HARDWARE_ERROR_STATUS = "Hardware Error Status"
    VELOCITY_I_GAIN = "Velocity I Gain"
    VELOCITY_P_GAIN = "Velocity P Gain"
    POSITION_D_GAIN = "Position D Gain"
    POSITION_I_GAIN = "Position I Gain"
    POSITION_P_GAIN = "Position P Gain"
    BUS_WATCHDOG = "Bus Watchdog"
    GOAL_PWM = "Goal PWM"
    GOAL_CURRENT = "Goal Current"
    GOAL_VELOCITY = "Goal Velocity"
    PROFILE_ACCELERATION = "Profile Acceleration"
    PROFILE_VELOCITY = "Profile Velocity"
    GOAL_POSITION = "Goal Position"
    REALTIME_TICK = "Realtime Tick"
    MOVING = "Moving"
    MOVING_STATUS = "Moving Status"
    PRESENT_PWM = "Present PWM"
    PRESENT_CURRENT = "Present Current"
    PRESENT_LOAD = "Present Load"
    PRESENT_VELOCITY = "Present Velocity"
    PRESENT_POSITION = "Present Position"
    PRESENT_INPUT_VOLTAGE = "Present Input Voltage"
    PRESENT_TEMPERATURE = "Present Temperature"
    # Protocol 1.0 names (AX / MX-1.0)
    CW_ANGLE_LIMIT = "CW Angle Limit"
    CCW_ANGLE_LIMIT = "CCW Angle Limit"
    MAX_TORQUE = "Max Torque"
    ALARM_LED = "Alarm LED"
    CW_COMPLIANCE_MARGIN = "CW Compliance Margin"
    CCW_COMPLIANCE_MARGIN = "CCW Compliance Margin"
    CW_COMPLIANCE_SLOPE = "CW Compliance Slope"
    CCW_COMPLIANCE_SLOPE = "CCW Compliance Slope"
    D_GAIN = "D Gain"
    I_GAIN = "I Gain"
    P_GAIN = "P Gain"
    MOVING_SPEED = "Moving Speed"
    TORQUE_LIMIT = "Torque Limit"
    PRESENT_SPEED = "Present Speed"
    LOCK = "Lock"
    PUNCH = "Punch"
    GOAL_ACCELERATION = "Goal Acceleration"


class Access(enum.Enum):
    """Whether the host may write a register."""

    R = "R"
    RW = "RW"


class Area(enum.Enum):
    """EEPROM registers persist and are locked while torque is on; RAM ones are volatile."""

    EEPROM = "EEPROM"
    RAM = "RAM"


class Encoding(enum.Enum):
    """How a register's bytes map to an integer (all little-endian)."""

    UNSIGNED = "unsigned"
    SIGNED = "signed"  # two's complement over the register size (Protocol 2.0)
    SIGN_MAGNITUDE_10 = "sign-magnitude bit 10"  # 1.0 speed/load: bit 10 is the direction


@dataclass(frozen=True, slots=True)
class Register:
    """One control-table item.

    ``min`` and ``max`` are the raw range the servo accepts (writes outside are
    answered with a data-range error); ``unit`` is the e-manual's unit text.
    """

    name: RegisterName
    address: int
    size: int
    access: Access
    area: Area
    unit: str = ""
    min: int = 0
    max: int = 0
    encoding: Encoding = Encoding.UNSIGNED
    default: int = 0

    def __post_init__(self) -> None:
        if self.size not in (1, 2, 4):
            raise ValueError(f"{self.name.value}: size must be 1, 2 or 4, got {self.size}")
        if self.max == 0 and self.min == 0:
            # Unbounded by the e-manual: allow the full raw range of the encoding.
            if self.encoding is Encoding.SIGNED:
                half = 1 << (8 * self.size - 1)
                object.__setattr__(self, "min", -half)
                object.__setattr__(self, "max", half - 1)
            else:
                object.__setattr__(self, "max", (1 << (8 * self.size)) - 1)

    @property
    def end(self) -> int:
        """First address after this register."""
        return self.address + self.size

    def decode(self, data: bytes) -> int:
        """Integer value of this register's bytes."""
        if len(data) != self.size:
            raise ValueError(f"{self.name.value}: {len(data)} bytes, expected {self.size}")
        raw = int.from_bytes(data, "little")
        if self.encoding is Encoding.SIGNED:
            return int.from_bytes(data, "little", signed=True)
        if self.encoding is Encoding.SIGN_MAGNITUDE_10:
            magnitude = raw & 0x3FF
            return -magnitude if raw & 0x400 else magnitude
        return raw

    def encode(self, value: int) -> bytes:
        """Bytes of ``value`` in this register's encoding (range is not checked here)."""
        if self.encoding is Encoding.SIGNED:
            return int(value).to_bytes(self.size, "little", signed=True)
        if self.encoding is Encoding.SIGN_MAGNITUDE_10:
            raw = min(abs(int(value)), 0x3FF) | (0x400 if value < 0 else 0)
            return raw.to_bytes(self.size, "little")
        return int(value).to_bytes(self.size, "little")


ControlTable = Mapping[RegisterName, Register]


def _table(*registers: Register) -> ControlTable:
    names = [r.name for r in registers]
    if len(set(names)) != len(names):
        raise ValueError("duplicate register in a control table")
    ordered = sorted(registers, key=lambda r: r.address)
    for a, b in itertools.pairwise(ordered):
        if a.end > b.address:
            raise ValueError(f"{a.name.value} overlaps {b.name.value}")
    return MappingProxyType({r.name: r for r in ordered})


R, RW = Access.R, Access.RW
EE, RAM = Area.EEPROM, Area.RAM
S, SM = Encoding.SIGNED, Encoding.SIGN_MAGNITUDE_10
N = RegisterName


@cache
def _x_series(*, current: bool, current_max: int = 0) -> ControlTable:
    """The X-series / MX(2.0) layout; ``current`` selects Present Current vs Present Load at 126."""
    effort = (
        [
            Register(N.CURRENT_LIMIT, 38, 2, RW, EE, "current unit", 0, current_max, S),
            Register(N.GOAL_CURRENT, 102, 2, RW, RAM, "current unit", -current_max, current_max, S),
            Register(N.PRESENT_CURRENT, 126, 2, R, RAM, "current unit", encoding=S),
        ]
        if current
        else [Register(N.PRESENT_LOAD, 126, 2, R, RAM, "0.1 %", -1000, 1000, S)]
    )
    return _table(
        Register(N.MODEL_NUMBER, 0, 2, R, EE),
        Register(N.MODEL_INFORMATION, 2, 4, R, EE),
        Register(N.FIRMWARE_VERSION, 6, 1, R, EE),
        Register(N.ID, 7, 1, RW, EE, "", 0, 252, default=1),
        Register(N.BAUD_RATE, 8, 1, RW, EE, "", 0, 7, default=1),
        Register(N.RETURN_DELAY_TIME, 9, 1, RW, EE, "2 µs", 0, 254, default=250),
        Register(N.DRIVE_MODE, 10, 1, RW, EE, "", 0, 13),
        Register(N.OPERATING_MODE, 11, 1, RW, EE, "", 0, 16, default=3),
        Register(N.SECONDARY_ID, 12, 1, RW, EE, "", 0, 255, default=255),
        Register(N.PROTOCOL_TYPE, 13, 1, RW, EE, "", 1, 2, default=2),
        Register(N.HOMING_OFFSET, 20, 4, RW, EE, "1 pulse", -1_044_479, 1_044_479, S),
        Register(N.MOVING_THRESHOLD, 24, 4, RW, EE, "0.229 rev/min", 0, 1023, default=10),
        Register(N.TEMPERATURE_LIMIT, 31, 1, RW, EE, "1 °C", 0, 100, default=80),
        Register(N.MAX_VOLTAGE_LIMIT, 32, 2, RW, EE, "0.1 V", 31, 160, default=160),
        Register(N.MIN_VOLTAGE_LIMIT, 34, 2, RW, EE, "0.1 V", 31, 160, default=31),
        Register(N.PWM_LIMIT, 36, 2, RW, EE, "0.113 %", 0, 885, default=885),
        *effort,
        Register(N.VELOCITY_LIMIT, 44, 4, RW, EE, "0.229 rev/min", 0, 1023, default=265),
        Register(N.MAX_POSITION_LIMIT, 48, 4, RW, EE, "1 pulse", 0, 4095, default=4095),
        Register(N.MIN_POSITION_LIMIT, 52, 4, RW, EE, "1 pulse", 0, 4095),
        Register(N.SHUTDOWN, 63, 1, RW, EE, "", 0, 255, default=52),
        Register(N.TORQUE_ENABLE, 64, 1, RW, RAM, "", 0, 1),
        Register(N.LED, 65, 1, RW, RAM, "", 0, 1),
        Register(N.STATUS_RETURN_LEVEL, 68, 1, RW, RAM, "", 0, 2, default=2),
        Register(N.REGISTERED_INSTRUCTION, 69, 1, R, RAM, "", 0, 1),
        Register(N.HARDWARE_ERROR_STATUS, 70, 1, R, RAM),
        Register(N.VELOCITY_I_GAIN, 76, 2, RW, RAM, "", 0, 16383, default=1920),
        Register(N.VELOCITY_P_GAIN, 78, 2, RW, RAM, "", 0, 16383, default=100),
        Register(N.POSITION_D_GAIN, 80, 2, RW, RAM, "", 0, 16383),
        Register(N.POSITION_I_GAIN, 82, 2, RW, RAM, "", 0, 16383),
        Register(N.POSITION_P_GAIN, 84, 2, RW, RAM, "", 0, 16383, default=800),
        # The table gives 1 ~ 127; 0 turns it off (and clears a trip); it reads -1 when tripped.
        Register(N.BUS_WATCHDOG, 98, 1, RW, RAM, "20 ms", 0, 127, S),
        Register(N.GOAL_PWM, 100, 2, RW, RAM, "0.113 %", -885, 885, S),
        Register(N.GOAL_VELOCITY, 104, 4, RW, RAM, "0.229 rev/min", -1023, 1023, S),
        Register(N.PROFILE_ACCELERATION, 108, 4, RW, RAM, "214.577 rev/min²", 0, 32767),
        Register(N.PROFILE_VELOCITY, 112, 4, RW, RAM, "0.229 rev/min", 0, 32767),
        Register(N.GOAL_POSITION, 116, 4, RW, RAM, "1 pulse", -1_048_575, 1_048_575, S),
        Register(N.REALTIME_TICK, 120, 2, R, RAM, "1 ms", 0, 32767),
        Register(N.MOVING, 122, 1, R, RAM, "", 0, 1),
        Register(N.MOVING_STATUS, 123, 1, R, RAM),
        Register(N.PRESENT_PWM, 124, 2, R, RAM, "0.113 %", encoding=S),
        Register(N.PRESENT_VELOCITY, 128, 4, R, RAM, "0.229 rev/min", encoding=S),
        Register(N.PRESENT_POSITION, 132, 4, R, RAM, "1 pulse", encoding=S),
        Register(N.PRESENT_INPUT_VOLTAGE, 144, 2, R, RAM, "0.1 V"),
        Register(N.PRESENT_TEMPERATURE, 146, 1, R, RAM, "1 °C"),
    )


def _protocol1(*, mx: bool, current: bool = False) -> ControlTable:
    """AX / MX(1.0) layout (https://emanual.robotis.com/docs/en/dxl/ax/ax-12a/)."""
    pos_max = 4095 if mx else 1023
    gains = (
        [
            Register(N.D_GAIN, 26, 1, RW, RAM, "", 0, 254),
            Register(N.I_GAIN, 27, 1, RW, RAM, "", 0, 254),
            Register(N.P_GAIN, 28, 1, RW, RAM, "", 0, 254, default=32),
        ]
        if mx
        else [
            Register(N.CW_COMPLIANCE_MARGIN, 26, 1, RW, RAM, "", 0, 255, default=1),
            Register(N.CCW_COMPLIANCE_MARGIN, 27, 1, RW, RAM, "", 0, 255, default=1),
            Register(N.CW_COMPLIANCE_SLOPE, 28, 1, RW, RAM, "", 0, 255, default=32),
            Register(N.CCW_COMPLIANCE_SLOPE, 29, 1, RW, RAM, "", 0, 255, default=32),
        ]
    )
    extra = [Register(N.GOAL_ACCELERATION, 73, 1, RW, RAM, "8.583 °/s²", 0, 254)] if mx else []
    if current:
        # MX-64/106: current [mA] = 4.5 * (value - 2048)
        extra.append(Register(N.PRESENT_CURRENT, 68, 2, R, RAM, "4.5 mA, 2048 = 0", 0, 4095))
    return _table(
        Register(N.MODEL_NUMBER, 0, 2, R, EE),
        Register(N.FIRMWARE_VERSION, 2, 1, R, EE),
        Register(N.ID, 3, 1, RW, EE, "", 0, 253, default=1),
        Register(N.BAUD_RATE, 4, 1, RW, EE, "", 0, 254, default=34 if mx else 1),
        Register(N.RETURN_DELAY_TIME, 5, 1, RW, EE, "2 µs", 0, 254, default=250),
        Register(N.CW_ANGLE_LIMIT, 6, 2, RW, EE, "1 pulse", 0, pos_max),
        Register(N.CCW_ANGLE_LIMIT, 8, 2, RW, EE, "1 pulse", 0, pos_max, default=pos_max),
        Register(N.TEMPERATURE_LIMIT, 11, 1, RW, EE, "1 °C", 0, 99, default=70 if not mx else 80),
        Register(N.MIN_VOLTAGE_LIMIT, 12, 1, RW, EE, "0.1 V", 50, 160, default=60),
        Register(
            N.MAX_VOLTAGE_LIMIT, 13, 1, RW, EE, "0.1 V", 50, 160, default=140 if not mx else 160
        ),
        Register(N.MAX_TORQUE, 14, 2, RW, EE, "0.1 %", 0, 1023, default=1023),
        Register(N.STATUS_RETURN_LEVEL, 16, 1, RW, EE, "", 0, 2, default=2),
        Register(N.ALARM_LED, 17, 1, RW, EE, "", 0, 127, default=36),
        Register(N.SHUTDOWN, 18, 1, RW, EE, "", 0, 127, default=36),
        Register(N.TORQUE_ENABLE, 24, 1, RW, RAM, "", 0, 1),
        Register(N.LED, 25, 1, RW, RAM, "", 0, 1),
        *gains,
        Register(N.GOAL_POSITION, 30, 2, RW, RAM, "1 pulse", 0, pos_max),
        Register(N.MOVING_SPEED, 32, 2, RW, RAM, "speed unit", 0, 2047),
        Register(N.TORQUE_LIMIT, 34, 2, RW, RAM, "0.1 %", 0, 1023, default=1023),
        Register(N.PRESENT_POSITION, 36, 2, R, RAM, "1 pulse", 0, pos_max),
        Register(N.PRESENT_SPEED, 38, 2, R, RAM, "speed unit", -1023, 1023, SM),
        Register(N.PRESENT_LOAD, 40, 2, R, RAM, "0.1 %", -1023, 1023, SM),
        Register(N.PRESENT_INPUT_VOLTAGE, 42, 1, R, RAM, "0.1 V"),
        Register(N.PRESENT_TEMPERATURE, 43, 1, R, RAM, "1 °C"),
        Register(N.REGISTERED_INSTRUCTION, 44, 1, R, RAM, "", 0, 1),
        Register(N.MOVING, 46, 1, R, RAM, "", 0, 1),
        Register(N.LOCK, 47, 1, RW, RAM, "", 0, 1),
        Register(N.PUNCH, 48, 2, RW, RAM, "", 0, 1023, default=32),
        *extra,
    )


X_LOAD_TABLE = _x_series(current=False)  # XL430, XC430, MX-28(2.0): address 126 is Present Load
AX_TABLE = _protocol1(mx=False)
MX1_TABLE = _protocol1(mx=True)
MX1_CURRENT_TABLE = _protocol1(mx=True, current=True)

#: Baud Rate register value -> bit/s, X series and MX(2.0)
#: (https://emanual.robotis.com/docs/en/dxl/x/xm430-w350/#baud-rate8).
X_BAUD_RATES: Mapping[int, int] = MappingProxyType(
    {0: 9600, 1: 57600, 2: 115200, 3: 1_000_000, 4: 2_000_000, 5: 3_000_000, 6: 4_000_000}
)
X_BAUD_RATES_45 = MappingProxyType({**X_BAUD_RATES, 7: 4_500_000})
#: Protocol 1.0: bit/s = 2 000 000 / (value + 1); the values the e-manual lists
#: (https://emanual.robotis.com/docs/en/dxl/ax/ax-12a/#baud-rate-4).
P1_BAUD_RATES: Mapping[int, int] = MappingProxyType(
    {
        1: 1_000_000,
        3: 500_000,
        4: 400_000,
        7: 250_000,
        9: 200_000,
        16: 115200,
        34: 57600,
        103: 19200,
        207: 9600,
    }
)
MX1_BAUD_RATES = MappingProxyType({**P1_BAUD_RATES, 250: 2_250_000, 251: 2_500_000, 252: 3_000_000})


class OperatingMode(enum.IntEnum):
    """Protocol 2.0 Operating Mode (address 11) values."""

    CURRENT = 0
    VELOCITY = 1
    POSITION = 3
    EXTENDED_POSITION = 4
    CURRENT_BASED_POSITION = 5
    PWM = 16


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """What the HAL needs to know about one servo model.

    Args:
        name: model name as written in configs, e.g. ``"XM430-W350"`` or ``"MX-28(2.0)"``.
        model_number: the value of the Model Number register.
        protocol: 1 or 2.
        table: the control table.
        ticks_per_rev: encoder ticks per output revolution (AX: 1024 ticks span 300°).
        center_tick: the tick of the joint's zero before offsets.
        position_min: lowest goal position tick in joint (position) mode.
        position_max: highest goal position tick in joint (position) mode.
        velocity_unit: [rev/min] per velocity tick.
        effort_unit: amperes (current sensing) or percent (load).
        effort_per_tick: [A] or [%] per effort tick.
        baud_rates: Baud Rate register value -> bit/s.
        has_fast_sync_read: the firmware answers Fast Sync Read / Fast Bulk Read.
        has_bus_watchdog: the Bus Watchdog register exists.
        has_bulk_read: the firmware answers Bulk Read (AX does not).
        fast_read_min_firmware: the lowest firmware that answers fast reads (0: any, or
            none when ``has_fast_sync_read`` is false).
        bus_watchdog_min_firmware: the lowest firmware with the Bus Watchdog (0: any).
        url: the e-manual page the table was transcribed from.
    """

    name: str
    model_number: int
    protocol: int
    table: ControlTable
    ticks_per_rev: float
    center_tick: int
    position_min: int
    position_max: int
    velocity_unit: float
    effort_unit: EffortUnit
    effort_per_tick: float
    baud_rates: Mapping[int, int]
    has_fast_sync_read: bool
    has_bus_watchdog: bool
    has_bulk_read: bool
    url: str
    fast_read_min_firmware: int = 0
    bus_watchdog_min_firmware: int = 0
    current_zero: int = 0  # MX(1.0) Current register is offset by 2048
    operating_modes: frozenset[OperatingMode] = field(default_factory=frozenset)

    @property
    def radians_per_tick(self) -> float:
        """Output-shaft radians per position tick."""
        return 2.0 * math.pi / self.ticks_per_rev

    @property
    def rad_per_s_per_velocity_tick(self) -> float:
        """[rad/s] per velocity tick."""
        return self.velocity_unit * 2.0 * math.pi / 60.0

    @property
    def effort_register(self) -> RegisterName:
        """Present Current where the model senses current, else Present Load."""
        if self.effort_unit is EffortUnit.AMPERE and self.protocol == 2:
            return N.PRESENT_CURRENT
        return N.PRESENT_LOAD

    @property
    def velocity_register(self) -> RegisterName:
        """Present Velocity (2.0) or Present Speed (1.0)."""
        return N.PRESENT_VELOCITY if self.protocol == 2 else N.PRESENT_SPEED

    def has(self, name: RegisterName) -> bool:
        """True when the model has register ``name``."""
        return name in self.table

    def register(self, name: RegisterName) -> Register:
        """The register ``name``; ``KeyError`` naming the model and what it has instead."""
        try:
            return self.table[name]
        except KeyError:
            hint = ""
            if name is N.PRESENT_CURRENT and N.PRESENT_LOAD in self.table:
                hint = " (it has no current sensing: use Present Load)"
            raise KeyError(f"{self.name} has no {name.value} register{hint}") from None

    def baud_value(self, baudrate: int) -> int:
        """The Baud Rate register value for ``baudrate`` [bit/s]; ``ValueError`` lists rates."""
        for value, rate in self.baud_rates.items():
            if rate == baudrate:
                return value
        rates = ", ".join(str(r) for r in sorted(self.baud_rates.values()))
        raise ValueError(f"{self.name} cannot run at {baudrate} bit/s; it supports {rates}")

    def span(self, names: Iterable[RegisterName]) -> tuple[int, int]:
        """``(start address, length)`` of the smallest block covering ``names``."""
        regs = [self.register(n) for n in names]
        if not regs:
            raise ValueError("span of no registers")
        start = min(r.address for r in regs)
        return start, max(r.end for r in regs) - start


_EMANUAL = "https://emanual.robotis.com/docs/en/dxl/"
_X_MODES = frozenset(OperatingMode)
_LOAD_MODES = frozenset(
    {
        OperatingMode.VELOCITY,
        OperatingMode.POSITION,
        OperatingMode.EXTENDED_POSITION,
        OperatingMode.PWM,
    }
)


# Fast Sync Read / Fast Bulk Read (0x8A / 0x9A), by firmware:
# - X430 / X540: 45, UNVERIFIED: no source found for the version (the copies of
#   https://emanual.robotis.com/docs/en/dxl/protocol2/ consulted predate the fast reads);
#   kept as it was.
# - XL330: 46, from third-party reports only ("XL330 firmware v46 or newer":
#   github.com/pollen-robotics/rustypot pull 122 and github.com/pollen-robotics/microduck
#   pull 305); no ROBOTIS page stored says so.
# - MX(2.0): none. A ROBOTIS engineer, answering an MX-28AR that ignored 0x8A:
#   "the DYNAMIXEL MX series (2.0 Firmware) does not function the Fast Sync / Bulk
#   read / write instruction (DYNAMIXEL X Series only)"
#   (https://forum.robotis.com/t/no-response-to-fast-sync-read-command-with-dynamixel-mx28-ar/820).
#   DynamixelSDK's fast_sync_read example header lists "MX(2.0) series" among its targets;
#   the forum answer is the observed behaviour, so MX(2.0) chains use the plain reads.
_FAST_READ_X = 45
_FAST_READ_XL330 = 46
# Bus Watchdog (98): "available from firmware v38" on the X series (the e-manual include
# _includes/en/dxl/control_table_buswatchdog.md in github.com/ROBOTIS-GIT/emanual, which
# leaves the note out on XL330 pages: every XL330 firmware has it). MX(2.0) has it at 98 on every
# firmware: its pages list it (docs/en/dxl/mx/mx-28-2.md, mx-64-2.md, mx-106-2.md) and
# Protocol 2.0 firmware for the MX starts at v39
# (https://emanual.robotis.com/docs/en/popup/faq_protocol_compatibility_table/);
# DynamixelWorkbench's dynamixel_item.cpp (items_MX2, items_EXTMX2) agrees.
_WATCHDOG_X = 38


def _x(
    name: str,
    number: int,
    page: str,
    *,
    amps_per_tick: float | None,
    current_max: int = 0,
    bauds: Mapping[int, int] = X_BAUD_RATES_45,
    fast_read_firmware: int | None = _FAST_READ_X,
    watchdog_firmware: int = _WATCHDOG_X,
) -> ModelSpec:
    """An X-series or MX(2.0) model; ``fast_read_firmware=None``: no fast reads at all."""
    current = amps_per_tick is not None
    return ModelSpec(
        name=name,
        model_number=number,
        protocol=2,
        table=_x_series(current=True, current_max=current_max) if current else X_LOAD_TABLE,
        ticks_per_rev=4096,
        center_tick=2048,
        position_min=0,
        position_max=4095,
        velocity_unit=0.229,
        effort_unit=EffortUnit.AMPERE if current else EffortUnit.PERCENT,
        effort_per_tick=amps_per_tick if amps_per_tick is not None else 0.1,
        baud_rates=bauds,
        has_fast_sync_read=fast_read_firmware is not None,
        has_bus_watchdog=True,
        has_bulk_read=True,
        url=_EMANUAL + page,
        fast_read_min_firmware=fast_read_firmware or 0,
        bus_watchdog_min_firmware=watchdog_firmware,
        operating_modes=_X_MODES if current else _LOAD_MODES,
    )


def _mx1(name: str, number: int, page: str, *, current: bool) -> ModelSpec:
    return ModelSpec(
        name=name,
        model_number=number,
        protocol=1,
        table=MX1_CURRENT_TABLE if current else MX1_TABLE,
        ticks_per_rev=4096,
        center_tick=2048,
        position_min=0,
        position_max=4095,
        velocity_unit=0.114,
        effort_unit=EffortUnit.PERCENT,
        effort_per_tick=0.1,
        baud_rates=MX1_BAUD_RATES,
        has_fast_sync_read=False,
        has_bus_watchdog=False,
        has_bulk_read=True,
        url=_EMANUAL + page,
    )


def _ax(name: str, number: int, page: str) -> ModelSpec:
    return ModelSpec(
        name=name,
        model_number=number,
        protocol=1,
        table=AX_TABLE,
        ticks_per_rev=1024 * 360 / 300,  # 1024 ticks span 300°, 0.29° per tick
        center_tick=512,
        position_min=0,
        position_max=1023,
        velocity_unit=0.111,
        effort_unit=EffortUnit.PERCENT,
        effort_per_tick=0.1,
        baud_rates=P1_BAUD_RATES,
        has_fast_sync_read=False,
        has_bus_watchdog=False,
        has_bulk_read=False,
        url=_EMANUAL + page,
    )


# Present Current / Goal Current / Current Limit unit and Current Limit maximum, each
# checked against the model's e-manual page (its source: docs/en/dxl/<series>/<model>.md
# in github.com/ROBOTIS-GIT/emanual), control table and Current Limit(38) section:
#   XL330-M077, XL330-M288        1 mA      0 ~ 1,750
#   XM430-W210, XM430-W350        2.69 mA   0 ~ 1,193
#   XM540-W150, XM540-W270        2.69 mA   0 ~ 2,047
#   XH430-W210, XH430-W350        2.69 mA   0 ~ 648
#   XH540-W150, XH540-W270        2.69 mA   0 ~ 2,047
#   MX-64(2.0)                    3.36 mA   0 ~ 1,941
#   MX-106(2.0)                   3.36 mA   0 ~ 2,047
#   XL430, XC430, MX-28(2.0): no current sensing (126 is Present Load, 0.1 %).
# The 1.34 mA unit belongs to the XH430-V (24 V) models, which hilbot does not list:
# XH430-V350 (model 1040) and XH430-V210 (1050), Current Limit 0 ~ 689 (x/xh430-v350/,
# x/xh430-v210/).
_ALL = (
    _x(
        "XL330-M077",
        1190,
        "x/xl330-m077/",
        amps_per_tick=0.001,
        current_max=1750,
        bauds=X_BAUD_RATES,
        fast_read_firmware=_FAST_READ_XL330,
        watchdog_firmware=0,
    ),
    _x(
        "XL330-M288",
        1200,
        "x/xl330-m288/",
        amps_per_tick=0.001,
        current_max=1750,
        bauds=X_BAUD_RATES,
        fast_read_firmware=_FAST_READ_XL330,
        watchdog_firmware=0,
    ),
    _x("XL430-W250", 1060, "x/xl430-w250/", amps_per_tick=None),
    _x("XC430-W150", 1070, "x/xc430-w150/", amps_per_tick=None),
    _x("XC430-W240", 1080, "x/xc430-w240/", amps_per_tick=None),
    _x("XM430-W210", 1030, "x/xm430-w210/", amps_per_tick=0.00269, current_max=1193),
    _x("XM430-W350", 1020, "x/xm430-w350/", amps_per_tick=0.00269, current_max=1193),
    _x("XM540-W150", 1130, "x/xm540-w150/", amps_per_tick=0.00269, current_max=2047),
    _x("XM540-W270", 1120, "x/xm540-w270/", amps_per_tick=0.00269, current_max=2047),
    _x("XH430-W210", 1010, "x/xh430-w210/", amps_per_tick=0.00269, current_max=648),
    _x("XH430-W350", 1000, "x/xh430-w350/", amps_per_tick=0.00269, current_max=648),
    _x("XH540-W150", 1110, "x/xh540-w150/", amps_per_tick=0.00269, current_max=2047),
    _x("XH540-W270", 1100, "x/xh540-w270/", amps_per_tick=0.00269, current_max=2047),
    _x(
        "MX-28(2.0)",
        30,
        "mx/mx-28-2/",
        amps_per_tick=None,
        fast_read_firmware=None,
        watchdog_firmware=0,
    ),
    _x(
        "MX-64(2.0)",
        311,
        "mx/mx-64-2/",
        amps_per_tick=0.00336,
        current_max=1941,
        fast_read_firmware=None,
        watchdog_firmware=0,
    ),
    _x(
        "MX-106(2.0)",
        321,
        "mx/mx-106-2/",
        amps_per_tick=0.00336,
        current_max=2047,
        fast_read_firmware=None,
        watchdog_firmware=0,
    ),
    _ax("AX-12A", 12, "ax/ax-12a/"),
    _ax("AX-18A", 18, "ax/ax-18a/"),
    _mx1("MX-28", 29, "mx/mx-28/", current=False),
    _mx1("MX-64", 310, "mx/mx-64/", current=True),
    _mx1("MX-106", 320, "mx/mx-106/", current=True),
)

#: Every supported model, by name.
MODELS: Mapping[str, ModelSpec] = MappingProxyType({m.name: m for m in _ALL})
#: Every supported model, by ``(protocol, model number)``.
MODELS_BY_NUMBER: Mapping[tuple[int, int], ModelSpec] = MappingProxyType(
    {(m.protocol, m.model_number): m for m in _ALL}
)


def _normalise(name: str) -> str:
    return name.strip().upper().replace("_", "-").replace(" ", "")


_BY_NORMALISED = {_normalise(n): m for n, m in MODELS.items()}


def model(name: str) -> ModelSpec:
    """Look a model up by name (case, ``_`` vs ``-`` and spaces ignored).

    Raises:
        KeyError: unknown model; the message lists the supported ones.
    """
    try:
        return _BY_NORMALISED[_normalise(name)]
    except KeyError:
        raise KeyError(
            f"unknown Dynamixel model {name!r}; supported: {', '.join(MODELS)}"
        ) from None


def model_by_number(protocol: int, number: int) -> ModelSpec | None:
    """The model with this model number on this protocol, or ``None`` if unsupported."""
    return MODELS_BY_NUMBER.get((protocol, number))
