"""Dynamixel control tables and model specifications, as data.

Each model's table is its series' layout (addresses, sizes, access: the X series,
MX(2.0), AX and MX(1.0) pages of the ROBOTIS e-manual) filled with that model's
own defaults and ranges from ``hilbot.hal.dynamixel.model_tables``, which names the
e-manual page (and its version) each value was read from. Model numbers agree with
dynamixel-sdk / DynamixelWorkbench. Tables are keyed by :class:`RegisterName`, never
by strings. A model that lacks a register (an XL430 has no Present Current: its
address 126 is Present Load) simply does not have it in its table, and
:meth:`ModelSpec.register` says so.

Ranges the e-manual gives through other registers are data too
(:class:`~hilbot.hal.registers.DependentRange`): Goal PWM, Current and Velocity lie
within minus and plus PWM, Current and Velocity Limit in every mode; Goal Position
within Min/Max Position Limit in Position Control Mode and within ±1,048,575 in the
extended and current-based position modes; Moving Speed (1.0) within 0 ~ 1,023 in
joint mode and 0 ~ 2,047 in wheel mode. The register types are family-neutral and
live in ``hilbot.hal.registers``; they are re-exported here.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from hilbot.hal import registers
from hilbot.hal.backend import EffortUnit
from hilbot.hal.dynamixel.model_tables import MODEL_TABLES, IndirectArea, ModelTable
from hilbot.hal.dynamixel.register_names import RegisterName
from hilbot.hal.registers import (
    Access,
    Area,
    Bound,
    DependentRange,
    Encoding,
    check_layout,
)

__all__ = [
    "MODELS",
    "MODELS_BY_NUMBER",
    "Access",
    "Area",
    "Bound",
    "ControlTable",
    "DependentRange",
    "Encoding",
    "IndirectArea",
    "ModelSpec",
    "ModelTable",
    "OperatingMode",
    "Register",
    "RegisterName",
    "model",
    "model_by_number",
]


@dataclass(frozen=True, slots=True)
class Register(registers.Register):
    """A Dynamixel control-table item (see :class:`hilbot.hal.registers.Register`)."""

    name: RegisterName


ControlTable = Mapping[RegisterName, Register]


def _table(*regs: Register) -> ControlTable:
    names = [r.name for r in regs]
    if len(set(names)) != len(names):
        raise ValueError("duplicate register in a control table")
    check_layout(regs)
    return MappingProxyType({r.name: r for r in sorted(regs, key=lambda r: r.address)})


R, RW = Access.R, Access.RW
EE, RAM = Area.EEPROM, Area.RAM
S, SM = Encoding.SIGNED, Encoding.SIGN_MAGNITUDE_10
N = RegisterName

#: Operating Mode (11) values, as in :class:`OperatingMode` below.
_POSITION, _EXTENDED, _CURRENT_POSITION = 3, 4, 5
#: Protocol 1.0 modes, from CW/CCW Angle Limit: wheel (both 0) answers as velocity
#: mode, joint as position mode, MX multi-turn (both 4095) as extended position mode.
_WHEEL, _JOINT, _MULTI_TURN = 1, 3, 4
#: Goal Position in the extended and current-based position modes (e-manual, Goal
#: Position(116)): -1,048,575 ~ 1,048,575 (±256 rev).
_MULTI_TURN_GOAL = 1_048_575


def _plus_minus(limit: RegisterName) -> tuple[DependentRange, ...]:
    return (DependentRange(Bound(limit, negate=True), Bound(limit)),)


class _Filler:
    """Registers of a series' template with one model's defaults and ranges."""

    def __init__(self, data: ModelTable) -> None:
        self.data = data

    def __call__(
        self,
        name: RegisterName,
        address: int,
        size: int,
        access: Access,
        area: Area,
        unit: str = "",
        low: int = 0,
        high: int = 0,
        encoding: Encoding = Encoding.UNSIGNED,
        default: int = 0,
        dependent: tuple[DependentRange, ...] = (),
        values: frozenset[int] = frozenset(),
    ) -> Register:
        low, high = self.data.ranges.get(name, (low, high))
        return Register(
            name,
            address,
            size,
            access,
            area,
            unit,
            low,
            high,
            encoding,
            self.data.defaults.get(name, default),
            dependent,
            values=values,
        )


def _x_series(data: ModelTable, *, current: bool) -> ControlTable:
    """The X-series / MX(2.0) layout filled with one model's values.

    ``current`` selects Present Current (and Current Limit, Goal Current) vs Present
    Load at 126.
    """
    reg = _Filler(data)
    # Operating Mode(11) takes the values of the model's modes: six with current
    # sensing (0, 1, 3, 4, 5, 16), four without (1, 3, 4, 16; e-manual Operating Mode
    # of the XL430 / MX-28(2.0) pages).
    modes = frozenset(_X_MODES if current else _LOAD_MODES)
    current_max = data.ranges.get(N.CURRENT_LIMIT, (0, 0))[1]
    velocity_max = data.ranges.get(N.VELOCITY_LIMIT, (0, 1023))[1]
    effort = (
        [
            reg(N.CURRENT_LIMIT, 38, 2, RW, EE, "current unit", 0, current_max),
            reg(N.GOAL_CURRENT, 102, 2, RW, RAM, "current unit", -current_max, current_max,
                S, dependent=_plus_minus(N.CURRENT_LIMIT)),
            reg(N.PRESENT_CURRENT, 126, 2, R, RAM, "current unit", encoding=S),
        ]
        if current
        else [reg(N.PRESENT_LOAD, 126, 2, R, RAM, "0.1 %", -1000, 1000, S)]
    )  # fmt: skip
    goal_position = (
        DependentRange(Bound(N.MIN_POSITION_LIMIT), Bound(N.MAX_POSITION_LIMIT),
                       frozenset({_POSITION})),
    )  # fmt: skip
    extra = {
        N.STARTUP_CONFIGURATION: reg(N.STARTUP_CONFIGURATION, 60, 1, RW, EE, "", 0, 3),
        N.PWM_SLOPE: reg(N.PWM_SLOPE, 62, 1, RW, EE, "1.977 mV/ms", 1, 255),
        N.BACKUP_READY: reg(N.BACKUP_READY, 147, 1, R, RAM, "", 0, 1),
        **{
            name: reg(name, 56 + k, 1, RW, EE, "", 0, 3, default=3)
            for k, name in enumerate(
                (N.EXTERNAL_PORT_MODE_1, N.EXTERNAL_PORT_MODE_2, N.EXTERNAL_PORT_MODE_3)
            )
        },
        **{
            name: reg(name, 152 + 2 * k, 2, RW, RAM)
            for k, name in enumerate(
                (N.EXTERNAL_PORT_DATA_1, N.EXTERNAL_PORT_DATA_2, N.EXTERNAL_PORT_DATA_3)
            )
        },
    }
    return _table(
        reg(N.MODEL_NUMBER, 0, 2, R, EE),
        reg(N.MODEL_INFORMATION, 2, 4, R, EE),
        reg(N.FIRMWARE_VERSION, 6, 1, R, EE),
        reg(N.ID, 7, 1, RW, EE, "", 0, 252, default=1),
        reg(N.BAUD_RATE, 8, 1, RW, EE, "", 0, 7, default=1),
        reg(N.RETURN_DELAY_TIME, 9, 1, RW, EE, "2 µs", 0, 254, default=250),
        reg(N.DRIVE_MODE, 10, 1, RW, EE, "", 0, 13),
        reg(N.OPERATING_MODE, 11, 1, RW, EE, "", 0, 16, default=3, values=modes),
        reg(N.SECONDARY_ID, 12, 1, RW, EE, "", 0, 255, default=255),
        reg(N.PROTOCOL_TYPE, 13, 1, RW, EE, "", 1, 2, default=2),
        reg(N.HOMING_OFFSET, 20, 4, RW, EE, "1 pulse", -1_044_479, 1_044_479, S),
        reg(N.MOVING_THRESHOLD, 24, 4, RW, EE, "0.229 rev/min", 0, 1023, default=10),
        reg(N.TEMPERATURE_LIMIT, 31, 1, RW, EE, "1 °C", 0, 100),
        reg(N.MAX_VOLTAGE_LIMIT, 32, 2, RW, EE, "0.1 V"),
        reg(N.MIN_VOLTAGE_LIMIT, 34, 2, RW, EE, "0.1 V"),
        reg(N.PWM_LIMIT, 36, 2, RW, EE, "0.113 %", 0, 885, default=885),
        *effort,
        reg(N.VELOCITY_LIMIT, 44, 4, RW, EE, "0.229 rev/min", 0, 1023),
        reg(N.MAX_POSITION_LIMIT, 48, 4, RW, EE, "1 pulse", 0, 4095, default=4095),
        reg(N.MIN_POSITION_LIMIT, 52, 4, RW, EE, "1 pulse", 0, 4095),
        *(r for name, r in extra.items() if name in data.extra),
        reg(N.SHUTDOWN, 63, 1, RW, EE, "", 0, 255),
        reg(N.TORQUE_ENABLE, 64, 1, RW, RAM, "", 0, 1),
        reg(N.LED, 65, 1, RW, RAM, "", 0, 1),
        reg(N.STATUS_RETURN_LEVEL, 68, 1, RW, RAM, "", 0, 2, default=2),
        reg(N.REGISTERED_INSTRUCTION, 69, 1, R, RAM, "", 0, 1),
        reg(N.HARDWARE_ERROR_STATUS, 70, 1, R, RAM),
        reg(N.VELOCITY_I_GAIN, 76, 2, RW, RAM, "", 0, 16383),
        reg(N.VELOCITY_P_GAIN, 78, 2, RW, RAM, "", 0, 16383),
        reg(N.POSITION_D_GAIN, 80, 2, RW, RAM, "", 0, 16383),
        reg(N.POSITION_I_GAIN, 82, 2, RW, RAM, "", 0, 16383),
        reg(N.POSITION_P_GAIN, 84, 2, RW, RAM, "", 0, 16383),
        reg(N.FEEDFORWARD_2ND_GAIN, 88, 2, RW, RAM, "", 0, 16383),
        reg(N.FEEDFORWARD_1ST_GAIN, 90, 2, RW, RAM, "", 0, 16383),
        # The table gives 1 ~ 127; 0 turns it off (and clears a trip); it reads -1 when tripped.
        reg(N.BUS_WATCHDOG, 98, 1, RW, RAM, "20 ms", 0, 127, S),
        reg(N.GOAL_PWM, 100, 2, RW, RAM, "0.113 %", -885, 885, S,
            dependent=_plus_minus(N.PWM_LIMIT)),
        reg(N.GOAL_VELOCITY, 104, 4, RW, RAM, "0.229 rev/min", -velocity_max, velocity_max, S,
            dependent=_plus_minus(N.VELOCITY_LIMIT)),
        reg(N.PROFILE_ACCELERATION, 108, 4, RW, RAM, "214.577 rev/min²", 0, 32767),
        reg(N.PROFILE_VELOCITY, 112, 4, RW, RAM, "0.229 rev/min", 0, 32767),
        reg(N.GOAL_POSITION, 116, 4, RW, RAM, "1 pulse", -_MULTI_TURN_GOAL, _MULTI_TURN_GOAL, S,
            dependent=goal_position),
        reg(N.REALTIME_TICK, 120, 2, R, RAM, "1 ms", 0, 32767),
        reg(N.MOVING, 122, 1, R, RAM, "", 0, 1),
        reg(N.MOVING_STATUS, 123, 1, R, RAM),
        reg(N.PRESENT_PWM, 124, 2, R, RAM, "0.113 %", encoding=S),
        reg(N.PRESENT_VELOCITY, 128, 4, R, RAM, "0.229 rev/min", encoding=S),
        reg(N.PRESENT_POSITION, 132, 4, R, RAM, "1 pulse", encoding=S),
        reg(N.VELOCITY_TRAJECTORY, 136, 4, R, RAM, "0.229 rev/min", encoding=S),
        reg(N.POSITION_TRAJECTORY, 140, 4, R, RAM, "1 pulse", encoding=S),
        reg(N.PRESENT_INPUT_VOLTAGE, 144, 2, R, RAM, "0.1 V"),
        reg(N.PRESENT_TEMPERATURE, 146, 1, R, RAM, "1 °C"),
    )  # fmt: skip


def _indirect_registers(areas: Iterable[IndirectArea]) -> tuple[Register, ...]:
    """Indirect Address ``k`` (default: its data byte's address) and Indirect Data ``k``."""
    out: list[Register] = []
    for area in areas:
        for i in range(area.count):
            k = area.first + i
            data = area.data + i
            out.append(
                Register(N.INDIRECT_ADDRESS, area.address + 2 * i, 2, RW, RAM, "",
                         area.target_min, area.target_max, default=data, index=k)
            )  # fmt: skip
            out.append(Register(N.INDIRECT_DATA, data, 1, RW, RAM, "", 0, 255, index=k))
    return tuple(out)


def _protocol1(data: ModelTable, *, mx: bool, current: bool = False) -> ControlTable:
    """AX / MX(1.0) layout (https://emanual.robotis.com/docs/en/dxl/ax/ax-12a/, mx/mx-28/)."""
    reg = _Filler(data)
    pos_max = 4095 if mx else 1023
    gains = (
        [
            reg(N.D_GAIN, 26, 1, RW, RAM, "", 0, 254),
            reg(N.I_GAIN, 27, 1, RW, RAM, "", 0, 254),
            reg(N.P_GAIN, 28, 1, RW, RAM, "", 0, 254, default=32),
        ]
        if mx
        else [
            reg(N.CW_COMPLIANCE_MARGIN, 26, 1, RW, RAM, "", 0, 255, default=1),
            reg(N.CCW_COMPLIANCE_MARGIN, 27, 1, RW, RAM, "", 0, 255, default=1),
            reg(N.CW_COMPLIANCE_SLOPE, 28, 1, RW, RAM, "", 0, 255, default=32),
            reg(N.CCW_COMPLIANCE_SLOPE, 29, 1, RW, RAM, "", 0, 255, default=32),
        ]
    )
    extra: list[Register] = []
    if mx:
        extra += [
            reg(N.MULTI_TURN_OFFSET, 20, 2, RW, EE, "1 pulse", encoding=S),
            reg(N.RESOLUTION_DIVIDER, 22, 1, RW, EE, "", 1, 4, default=1),
            reg(N.REALTIME_TICK, 50, 2, R, RAM, "1 ms", 0, 32767),
            reg(N.GOAL_ACCELERATION, 73, 1, RW, RAM, "8.583 °/s²", 0, 254),
        ]
    if N.DRIVE_MODE in data.extra:
        extra.append(reg(N.DRIVE_MODE, 10, 1, RW, EE, "", 0, 3))
    if current:
        # MX-64/106 "Current": I = 4.5 mA * (value - 2048); the page marks it RW.
        extra.append(reg(N.PRESENT_CURRENT, 68, 2, RW, RAM, "4.5 mA, 2048 = 0", 0, 4095))
    if N.TORQUE_CTRL_MODE_ENABLE in data.extra:
        extra += [
            reg(N.TORQUE_CTRL_MODE_ENABLE, 70, 1, RW, RAM, "", 0, 1),
            reg(N.GOAL_TORQUE, 71, 2, RW, RAM, "4.5 mA", 0, 2047),
        ]
    max_torque = data.defaults.get(N.MAX_TORQUE, 1023)
    speed = (DependentRange(0, 1023, frozenset({_JOINT, _MULTI_TURN})),)
    return _table(
        reg(N.MODEL_NUMBER, 0, 2, R, EE),
        reg(N.FIRMWARE_VERSION, 2, 1, R, EE),
        reg(N.ID, 3, 1, RW, EE, "", 0, 253, default=1),
        reg(N.BAUD_RATE, 4, 1, RW, EE, "", 0, 254, default=34 if mx else 1),
        reg(N.RETURN_DELAY_TIME, 5, 1, RW, EE, "2 µs", 0, 254, default=250),
        reg(N.CW_ANGLE_LIMIT, 6, 2, RW, EE, "1 pulse", 0, pos_max),
        reg(N.CCW_ANGLE_LIMIT, 8, 2, RW, EE, "1 pulse", 0, pos_max, default=pos_max),
        reg(N.TEMPERATURE_LIMIT, 11, 1, RW, EE, "1 °C", 0, 99),
        reg(N.MIN_VOLTAGE_LIMIT, 12, 1, RW, EE, "0.1 V", 50, 250, default=60),
        reg(N.MAX_VOLTAGE_LIMIT, 13, 1, RW, EE, "0.1 V", 50, 250),
        reg(N.MAX_TORQUE, 14, 2, RW, EE, "0.1 %", 0, 1023),
        reg(N.STATUS_RETURN_LEVEL, 16, 1, RW, EE, "", 0, 2, default=2),
        reg(N.ALARM_LED, 17, 1, RW, EE, "", 0, 127, default=36),
        reg(N.SHUTDOWN, 18, 1, RW, EE, "", 0, 127, default=36),
        reg(N.TORQUE_ENABLE, 24, 1, RW, RAM, "", 0, 1),
        reg(N.LED, 25, 1, RW, RAM, "", 0, 1),
        *gains,
        reg(N.GOAL_POSITION, 30, 2, RW, RAM, "1 pulse", 0, pos_max),
        reg(N.MOVING_SPEED, 32, 2, RW, RAM, "speed unit", 0, 2047, dependent=speed),
        reg(N.TORQUE_LIMIT, 34, 2, RW, RAM, "0.1 %", 0, 1023, default=max_torque),
        reg(N.PRESENT_POSITION, 36, 2, R, RAM, "1 pulse", 0, pos_max),
        reg(N.PRESENT_SPEED, 38, 2, R, RAM, "speed unit", -1023, 1023, SM),
        reg(N.PRESENT_LOAD, 40, 2, R, RAM, "0.1 %", -1023, 1023, SM),
        reg(N.PRESENT_INPUT_VOLTAGE, 42, 1, R, RAM, "0.1 V"),
        reg(N.PRESENT_TEMPERATURE, 43, 1, R, RAM, "1 °C"),
        reg(N.REGISTERED_INSTRUCTION, 44, 1, R, RAM, "", 0, 1),
        reg(N.MOVING, 46, 1, R, RAM, "", 0, 1),
        reg(N.LOCK, 47, 1, RW, RAM, "", 0, 1),
        # AX: "0x20 to 0x3FF" (e-manual Punch); MX pages give the default 0 and no range.
        reg(N.PUNCH, 48, 2, RW, RAM, "", 0 if mx else 32, 1023, default=0 if mx else 32),
        *extra,
    )


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
        source: the e-manual source file (and version) the values were read from.
        series: registers of numbered series (Indirect Address / Data), in address order.
        indirect: the Indirect Address / Data blocks.
        unsourced: what the e-manual page does not give, and what is used instead.
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
    source: str = ""
    series: tuple[Register, ...] = ()
    indirect: tuple[IndirectArea, ...] = ()
    unsourced: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_layout(self.registers())  # the series must not overlap the named registers

    def registers(self) -> Iterator[Register]:
        """Every register: the named ones, then the numbered series."""
        yield from self.table.values()
        yield from self.series

    def operating_mode(self, value_of: Callable[[RegisterName], int]) -> int:
        """The operating mode the range rules use, from the registers read by ``value_of``.

        Protocol 2.0: Operating Mode (11). Protocol 1.0 has no such register: CW and
        CCW Angle Limit both 0 is wheel mode (answered as velocity mode, 1), both 4095
        on an MX is multi-turn (extended position, 4), anything else joint mode (3).
        """
        if N.OPERATING_MODE in self.table:
            return value_of(N.OPERATING_MODE)
        cw, ccw = value_of(N.CW_ANGLE_LIMIT), value_of(N.CCW_ANGLE_LIMIT)
        if cw == ccw == 0:
            return _WHEEL
        if cw == ccw == 4095:
            return _MULTI_TURN
        return _JOINT

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


def _spec_fields(name: str) -> dict[str, object]:
    data = MODEL_TABLES[name]
    return {
        "source": data.source,
        "series": _indirect_registers(data.indirect),
        "indirect": data.indirect,
        "unsourced": data.unsourced,
    }


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
    data = MODEL_TABLES[name]
    if current and data.ranges[N.CURRENT_LIMIT][1] != current_max:
        raise ValueError(f"{name}: Current Limit maximum disagrees with model_tables")
    return ModelSpec(
        name=name,
        model_number=number,
        protocol=2,
        table=_x_series(data, current=current),
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
        **_spec_fields(name),  # type: ignore[arg-type]
    )


def _mx1(name: str, number: int, page: str, *, current: bool) -> ModelSpec:
    return ModelSpec(
        name=name,
        model_number=number,
        protocol=1,
        table=_protocol1(MODEL_TABLES[name], mx=True, current=current),
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
        **_spec_fields(name),  # type: ignore[arg-type]
    )


def _ax(name: str, number: int, page: str) -> ModelSpec:
    return ModelSpec(
        name=name,
        model_number=number,
        protocol=1,
        table=_protocol1(MODEL_TABLES[name], mx=False),
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
        **_spec_fields(name),  # type: ignore[arg-type]
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
