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

import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from hilbot.hal.backend import EffortUnit, HardwareErrorFlags
from hilbot.hal.dynamixel.model_tables import MODEL_TABLES, IndirectArea, ModelTable
from hilbot.hal.dynamixel.register_names import RegisterName
from hilbot.hal.dynamixel.series_tables import (
    LOAD_MODES,
    X_MODES,
    XL320_WHEEL,
    ControlTable,
    OperatingMode,
    Register,
    indirect_registers,
    protocol1_table,
    x_series_table,
    xl320_table,
)
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


N = RegisterName
#: Protocol 1.0 modes, from CW/CCW Angle Limit (see ``ModelSpec.operating_mode``).
_WHEEL, _JOINT, _MULTI_TURN = 1, 3, 4


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
        error_bits: Hardware Error Status bit -> flag where it differs from the X
            series' (whose bits are :class:`HardwareErrorFlags`' own); ``None``: those.
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
    error_bits: Mapping[int, HardwareErrorFlags] | None = None

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
        The XL-320 says it in Control Mode (11): 1 wheel, 2 joint.
        """
        if N.OPERATING_MODE in self.table:
            return value_of(N.OPERATING_MODE)
        if N.CONTROL_MODE in self.table:
            return _WHEEL if value_of(N.CONTROL_MODE) == XL320_WHEEL else _JOINT
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
        if self.effort_unit is EffortUnit.AMPERE and N.PRESENT_VELOCITY in self.table:
            return N.PRESENT_CURRENT
        return N.PRESENT_LOAD

    @property
    def velocity_register(self) -> RegisterName:
        """Present Velocity (X series, MX(2.0)) or Present Speed (1.0 tables, XL-320)."""
        return N.PRESENT_VELOCITY if N.PRESENT_VELOCITY in self.table else N.PRESENT_SPEED

    @property
    def limit_registers(self) -> tuple[RegisterName, RegisterName]:
        """The registers bounding goal positions: Min/Max Position Limit or CW/CCW Angle Limit."""
        if N.MIN_POSITION_LIMIT in self.table:
            return N.MIN_POSITION_LIMIT, N.MAX_POSITION_LIMIT
        return N.CW_ANGLE_LIMIT, N.CCW_ANGLE_LIMIT

    def hardware_errors(self, status: int) -> HardwareErrorFlags:
        """The flags of a Hardware Error Status register value."""
        if self.error_bits is None:
            return HardwareErrorFlags(status & 0x3D)
        out = HardwareErrorFlags.NONE
        for bit, flag in self.error_bits.items():
            if status & bit:
                out |= flag
        return out

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
        "series": indirect_registers(data.indirect),
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
        table=x_series_table(data, current=current),
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
        operating_modes=X_MODES if current else LOAD_MODES,
        **_spec_fields(name),  # type: ignore[arg-type]
    )


def _mx1(name: str, number: int, page: str, *, current: bool) -> ModelSpec:
    return ModelSpec(
        name=name,
        model_number=number,
        protocol=1,
        table=protocol1_table(MODEL_TABLES[name], mx=True, current=current),
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
        table=protocol1_table(MODEL_TABLES[name], mx=False),
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


#: XL-320 Baud Rate(4) values (e-manual).
XL320_BAUD_RATES: Mapping[int, int] = MappingProxyType({0: 9600, 1: 57600, 2: 115200, 3: 1_000_000})
#: XL-320 Hardware Error Status bits, as its Shutdown(18) names them.
XL320_ERROR_BITS: Mapping[int, HardwareErrorFlags] = MappingProxyType(
    {
        1: HardwareErrorFlags.OVERLOAD,
        2: HardwareErrorFlags.OVERHEATING,
        4: HardwareErrorFlags.INPUT_VOLTAGE,
    }
)


def _xl320() -> ModelSpec:
    return ModelSpec(
        name="XL-320",
        model_number=350,
        protocol=2,
        table=xl320_table(MODEL_TABLES["XL-320"]),
        ticks_per_rev=1024 * 360 / 300,  # 1024 ticks span 300°, 0.29° per tick
        center_tick=512,
        position_min=0,
        position_max=1023,
        velocity_unit=0.111,
        effort_unit=EffortUnit.PERCENT,
        effort_per_tick=0.1,
        baud_rates=XL320_BAUD_RATES,
        has_fast_sync_read=False,
        has_bus_watchdog=False,
        has_bulk_read=True,
        url=_EMANUAL + "x/xl320/",
        error_bits=XL320_ERROR_BITS,
        **_spec_fields("XL-320"),  # type: ignore[arg-type]
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
    _xl320(),
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
