"""The control-table layouts of the Dynamixel series, filled with one model's values.

The X series / MX(2.0) share one layout (addresses, sizes, access) and AX / MX(1.0)
another, as their e-manual pages give them; :func:`x_series_table` and
:func:`protocol1_table` fill a layout with one model's defaults and ranges
(``hilbot.hal.dynamixel.model_tables``) and attach the ranges the e-manual gives
through other registers as :class:`~hilbot.hal.registers.DependentRange` data.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from hilbot.hal import registers
from hilbot.hal.dynamixel.model_tables import IndirectArea, ModelTable
from hilbot.hal.dynamixel.register_names import RegisterName
from hilbot.hal.registers import Access, Area, Bound, DependentRange, Encoding, check_layout


class OperatingMode(enum.IntEnum):
    """Protocol 2.0 Operating Mode (address 11) values."""

    CURRENT = 0
    VELOCITY = 1
    POSITION = 3
    EXTENDED_POSITION = 4
    CURRENT_BASED_POSITION = 5
    PWM = 16


#: The modes of a model with current sensing, and of one without (XL430, XC430, MX-28(2.0)).
X_MODES = frozenset(OperatingMode)
LOAD_MODES = frozenset(
    {
        OperatingMode.VELOCITY,
        OperatingMode.POSITION,
        OperatingMode.EXTENDED_POSITION,
        OperatingMode.PWM,
    }
)


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


def x_series_table(data: ModelTable, *, current: bool) -> ControlTable:
    """The X-series / MX(2.0) layout filled with one model's values.

    ``current`` selects Present Current (and Current Limit, Goal Current) vs Present
    Load at 126.
    """
    reg = _Filler(data)
    # Operating Mode(11) takes the values of the model's modes: six with current
    # sensing (0, 1, 3, 4, 5, 16), four without (1, 3, 4, 16; e-manual Operating Mode
    # of the XL430 / MX-28(2.0) pages).
    modes = frozenset(X_MODES if current else LOAD_MODES)
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


def indirect_registers(areas: Iterable[IndirectArea]) -> tuple[Register, ...]:
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


def protocol1_table(data: ModelTable, *, mx: bool, current: bool = False) -> ControlTable:
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


#: XL-320 Control Mode(11) values (e-manual): 1 wheel, 2 joint.
XL320_WHEEL, XL320_JOINT = 1, 2


def xl320_table(data: ModelTable) -> ControlTable:
    """XL-320 layout (https://emanual.robotis.com/docs/en/dxl/x/xl320/).

    Protocol 2.0 on a table of its own, 1.0-like (1 024 ticks over 300°), with Control
    Mode and Hardware Error Status registers.
    """
    reg = _Filler(data)
    speed = (DependentRange(0, 1023, frozenset({_JOINT})),)
    return _table(
        reg(N.MODEL_NUMBER, 0, 2, R, EE),
        reg(N.FIRMWARE_VERSION, 2, 1, R, EE),
        reg(N.ID, 3, 1, RW, EE, "", 0, 252, default=1),
        reg(N.BAUD_RATE, 4, 1, RW, EE, "", 0, 3, default=3),
        reg(N.RETURN_DELAY_TIME, 5, 1, RW, EE, "2 µs", 0, 254, default=250),
        reg(N.CW_ANGLE_LIMIT, 6, 2, RW, EE, "1 pulse", 0, 1023),
        reg(N.CCW_ANGLE_LIMIT, 8, 2, RW, EE, "1 pulse", 0, 1023, default=1023),
        reg(N.CONTROL_MODE, 11, 1, RW, EE, "", 1, 2, default=XL320_JOINT,
            values=frozenset({XL320_WHEEL, XL320_JOINT})),
        reg(N.TEMPERATURE_LIMIT, 12, 1, RW, EE, "1 °C", 0, 150),
        reg(N.MIN_VOLTAGE_LIMIT, 13, 1, RW, EE, "0.1 V", 50, 250),
        reg(N.MAX_VOLTAGE_LIMIT, 14, 1, RW, EE, "0.1 V", 50, 250),
        reg(N.MAX_TORQUE, 15, 2, RW, EE, "0.1 %", 0, 1023),
        reg(N.STATUS_RETURN_LEVEL, 17, 1, RW, EE, "", 0, 2, default=2),
        reg(N.SHUTDOWN, 18, 1, RW, EE, "", 0, 7),
        reg(N.TORQUE_ENABLE, 24, 1, RW, RAM, "", 0, 1),
        reg(N.LED, 25, 1, RW, RAM, "", 0, 7),
        reg(N.D_GAIN, 27, 1, RW, RAM, "", 0, 254),
        reg(N.I_GAIN, 28, 1, RW, RAM, "", 0, 254),
        reg(N.P_GAIN, 29, 1, RW, RAM, "", 0, 254, default=32),
        reg(N.GOAL_POSITION, 30, 2, RW, RAM, "1 pulse", 0, 1023),
        reg(N.MOVING_SPEED, 32, 2, RW, RAM, "0.111 rev/min", 0, 2047, dependent=speed),
        reg(N.TORQUE_LIMIT, 35, 2, RW, RAM, "0.1 %", 0, 1023, default=1023),
        reg(N.PRESENT_POSITION, 37, 2, R, RAM, "1 pulse", 0, 1023),
        reg(N.PRESENT_SPEED, 39, 2, R, RAM, "0.111 rev/min", -1023, 1023, SM),
        reg(N.PRESENT_LOAD, 41, 2, R, RAM, "0.1 %", -1023, 1023, SM),
        reg(N.PRESENT_INPUT_VOLTAGE, 45, 1, R, RAM, "0.1 V"),
        reg(N.PRESENT_TEMPERATURE, 46, 1, R, RAM, "1 °C"),
        reg(N.REGISTERED_INSTRUCTION, 47, 1, R, RAM, "", 0, 1),
        reg(N.MOVING, 49, 1, R, RAM, "", 0, 1),
        reg(N.HARDWARE_ERROR_STATUS, 50, 1, R, RAM),
        reg(N.PUNCH, 51, 2, RW, RAM, "", 0, 1023, default=32),
    )  # fmt: skip
