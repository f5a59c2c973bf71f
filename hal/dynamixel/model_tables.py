"""Per-model control-table values, each transcribed from that model's e-manual page.

The layout (addresses, sizes, access, the registers every model of a series has)
is the series' and lives in ``hilbot.hal.dynamixel.tables``; what differs between
models is here, one :class:`ModelTable` per model, each naming the page it comes
from. The pages are the ROBOTIS e-manual's sources, ``docs/en/dxl/<series>/<model>.md``
in github.com/ROBOTIS-GIT/emanual, at the commit named (the version that was read);
they are published at https://emanual.robotis.com/docs/en/dxl/<series>/<model>/.

Ranges the page gives through other registers (Goal PWM, Current, Velocity and
Position) are the series' and are built in ``tables.py``; constant ranges that differ
per model (Velocity Limit 0 ~ 2,047 on the XL330, 0 ~ 1,023 elsewhere) are here.
What a page leaves open is listed in ``unsourced`` and said in docs/simulation.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from hilbot.hal.dynamixel.register_names import RegisterName

N = RegisterName


@dataclass(frozen=True, slots=True)
class IndirectArea:
    """One block of Indirect Address registers and the Indirect Data bytes they map.

    Indirect Address ``k`` (2 bytes, at ``address + 2 * (k - first)``) holds the
    address that Indirect Data ``k`` (1 byte, at ``data + (k - first)``) reads and
    writes; its default is the data byte's own address.
    """

    first: int  # number of the first Indirect Address / Data of the block
    count: int
    address: int  # address of Indirect Address ``first``
    data: int  # address of Indirect Data ``first``
    target_min: int  # range of an Indirect Address value
    target_max: int


@dataclass(frozen=True, slots=True)
class ModelTable:
    """What one model's e-manual page gives that differs from its series' template.

    Args:
        source: the e-manual source file and commit the values were read from.
        defaults: initial values by register (Model Number is the model's own).
        ranges: constant ``(min, max)`` ranges by register.
        extra: optional registers of the series this model has.
        indirect: its Indirect Address / Data blocks.
        unsourced: what the page does not say, and what was used instead.
    """

    source: str
    defaults: Mapping[RegisterName, int]
    ranges: Mapping[RegisterName, tuple[int, int]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    extra: frozenset[RegisterName] = frozenset()
    indirect: tuple[IndirectArea, ...] = ()
    unsourced: tuple[str, ...] = ()


_REPO = "github.com/ROBOTIS-GIT/emanual/blob/"

#: X430 / X540 / MX(2.0): Indirect Address 1 ~ 28 at 168, Data at 224; 29 ~ 56 at 578 / 634.
X_INDIRECT = (
    IndirectArea(1, 28, 168, 224, 64, 661),
    IndirectArea(29, 28, 578, 634, 64, 661),
)
#: XL330: Indirect Address 1 ~ 20 at 168, Data at 208, values 64 ~ 227.
XL330_INDIRECT = (IndirectArea(1, 20, 168, 208, 64, 227),)

_BACKUP = frozenset({N.STARTUP_CONFIGURATION, N.BACKUP_READY})
_PORTS = frozenset(
    {
        N.EXTERNAL_PORT_MODE_1,
        N.EXTERNAL_PORT_MODE_2,
        N.EXTERNAL_PORT_MODE_3,
        N.EXTERNAL_PORT_DATA_1,
        N.EXTERNAL_PORT_DATA_2,
        N.EXTERNAL_PORT_DATA_3,
    }
)
_NO_BACKUP_ROW = (
    "Startup Configuration(60) and Backup Ready(147): not in the table of the page version "
    "read; modelled as on the sibling models whose pages list them (Backup Ready exists "
    "from firmware v45, XL330 v46: _includes/en/dxl/control_table_backup_ready.md)"
)
_NO_RANGE_COLUMN = (
    "the page version read has no Range column: constant ranges are the X-series template's "
    "(X430 pages), dependent ranges as the register descriptions give them"
)


def _gains(vel_i: int, vel_p: int, pos_d: int, pos_i: int, pos_p: int) -> dict[RegisterName, int]:
    return {
        N.VELOCITY_I_GAIN: vel_i,
        N.VELOCITY_P_GAIN: vel_p,
        N.POSITION_D_GAIN: pos_d,
        N.POSITION_I_GAIN: pos_i,
        N.POSITION_P_GAIN: pos_p,
    }


def _x(
    page: str,
    commit: str,
    *,
    temperature: int,
    voltage: tuple[int, int],
    voltage_range: tuple[int, int],
    velocity: int,
    gains: dict[RegisterName, int],
    current: int | None = None,
    shutdown: int = 52,
    ranges: Mapping[RegisterName, tuple[int, int]] | None = None,
    extra: frozenset[RegisterName] = frozenset(),
    unsourced: tuple[str, ...] = (),
) -> ModelTable:
    """An X-series / MX(2.0) page: ``voltage`` is (min, max) of the limit defaults."""
    defaults = {
        N.TEMPERATURE_LIMIT: temperature,
        N.MIN_VOLTAGE_LIMIT: voltage[0],
        N.MAX_VOLTAGE_LIMIT: voltage[1],
        N.VELOCITY_LIMIT: velocity,
        N.SHUTDOWN: shutdown,
        **gains,
    }
    all_ranges = {
        N.MIN_VOLTAGE_LIMIT: voltage_range,
        N.MAX_VOLTAGE_LIMIT: voltage_range,
        N.VELOCITY_LIMIT: (0, 1023),
        **(ranges or {}),
    }
    if current is not None:
        defaults[N.CURRENT_LIMIT] = current
        all_ranges[N.CURRENT_LIMIT] = (0, current)
    return ModelTable(
        source=f"{_REPO}{commit}/docs/en/dxl/{page}.md",
        defaults=MappingProxyType(defaults),
        ranges=MappingProxyType(all_ranges),
        extra=extra,
        indirect=X_INDIRECT,
        unsourced=unsourced,
    )


def _xl330(commit: str, page: str, *, velocity: int, gains: dict[RegisterName, int]) -> ModelTable:
    defaults = {
        N.TEMPERATURE_LIMIT: 70,
        N.MIN_VOLTAGE_LIMIT: 35,
        N.MAX_VOLTAGE_LIMIT: 70,
        N.CURRENT_LIMIT: 1750,
        N.VELOCITY_LIMIT: velocity,
        N.PWM_SLOPE: 140,
        N.SHUTDOWN: 53,
        **gains,
    }
    ranges = {
        N.BAUD_RATE: (0, 6),
        N.DRIVE_MODE: (0, 5),
        N.PROTOCOL_TYPE: (2, 22),
        N.MIN_VOLTAGE_LIMIT: (31, 70),
        N.MAX_VOLTAGE_LIMIT: (31, 70),
        N.CURRENT_LIMIT: (0, 1750),
        N.VELOCITY_LIMIT: (0, 2047),
    }
    return ModelTable(
        source=f"{_REPO}{commit}/docs/en/dxl/x/{page}.md",
        defaults=MappingProxyType(defaults),
        ranges=MappingProxyType(ranges),
        extra=_BACKUP | {N.PWM_SLOPE},
        indirect=XL330_INDIRECT,
        unsourced=(
            "Protocol Type range: the page gives 2 ~ 22 (2: Protocol 2.0; the values in "
            "between are not described) and is transcribed as such",
        ),
    )


_X540_DRIVE = "Drive Mode range"

#: Every model hilbot lists, by its name in ``tables.MODELS``.
MODEL_TABLES: Mapping[str, ModelTable] = MappingProxyType(
    {
        "XL330-M077": _xl330(
            "01ba9719bbc315fc6354fc93a08cba7d9505a107",
            "xl330-m077",
            velocity=1620,
            gains=_gains(400, 40, 0, 400, 400),
        ),
        "XL330-M288": _xl330(
            "028a13d257d7b1869b6f46af65d482c912b6852f",
            "xl330-m288",
            velocity=445,
            gains=_gains(1600, 180, 0, 0, 400),
        ),
        "XL430-W250": _x(
            "x/xl430-w250",
            "00a4b781d5a52e9b62599ea084cabc11e33b3b46",
            temperature=72,
            voltage=(60, 140),
            voltage_range=(60, 140),
            velocity=265,
            gains=_gains(1000, 100, 4000, 0, 640),
            ranges={N.DRIVE_MODE: (0, 13)},
            extra=_BACKUP,
        ),
        "XC430-W150": _x(
            "x/xc430-w150",
            "e187952c0c902c5ae9c253a4c09d8861e97512a0",
            temperature=80,
            voltage=(60, 160),
            voltage_range=(60, 160),
            velocity=460,
            gains=_gains(1920, 100, 0, 0, 460),
            ranges={N.ID: (0, 253), N.DRIVE_MODE: (0, 1)},
            extra=_BACKUP,
            unsourced=(_NO_BACKUP_ROW,),
        ),
        "XC430-W240": _x(
            "x/xc430-w240",
            "d33bc5f9d62d906ab75ead89f6d5696aadcf24ca",
            temperature=80,
            voltage=(60, 160),
            voltage_range=(60, 160),
            velocity=306,
            gains=_gains(1920, 100, 0, 0, 700),
            ranges={N.ID: (0, 253), N.DRIVE_MODE: (0, 1)},
            extra=_BACKUP,
            unsourced=(_NO_BACKUP_ROW,),
        ),
        "XM430-W210": _x(
            "x/xm430-w210",
            "8bb7656aea95aa4f6e24657b67cd1cc3feaa0ff2",
            temperature=80,
            voltage=(95, 160),
            voltage_range=(95, 160),
            velocity=330,
            current=1193,
            gains=_gains(1920, 100, 0, 0, 800),
            ranges={N.DRIVE_MODE: (0, 5)},
            extra=_BACKUP,
            unsourced=(_NO_BACKUP_ROW,),
        ),
        "XM430-W350": _x(
            "x/xm430-w350",
            "08551725617f8cdf053bc7c28c422b9ab10dadd4",
            temperature=80,
            voltage=(95, 160),
            voltage_range=(95, 160),
            velocity=200,
            current=1193,
            gains=_gains(1920, 100, 0, 0, 800),
            ranges={N.ID: (0, 253), N.DRIVE_MODE: (0, 1)},
            extra=_BACKUP,
            unsourced=(
                _NO_BACKUP_ROW,
                "Min/Max Voltage Limit range: the page gives 110 ~ 300, which excludes its "
                "own default (95); 95 ~ 160 as on the XM430-W210 page is used",
            ),
        ),
        "XM540-W150": _x(
            "x/xm540-w150",
            "089162d6f19f8d4d2ab1b19aa40af7c27a27ec47",
            temperature=80,
            voltage=(95, 160),
            voltage_range=(95, 160),
            velocity=230,
            current=2047,
            gains=_gains(1920, 100, 0, 0, 800),
            ranges={N.ID: (0, 253), N.DRIVE_MODE: (0, 2)},
            extra=_BACKUP | _PORTS,
            unsourced=(_NO_BACKUP_ROW,),
        ),
        "XM540-W270": _x(
            "x/xm540-w270",
            "028a13d257d7b1869b6f46af65d482c912b6852f",
            temperature=80,
            voltage=(95, 160),
            voltage_range=(95, 160),
            velocity=128,
            current=2047,
            gains=_gains(1920, 100, 0, 0, 800),
            ranges={N.DRIVE_MODE: (0, 5)},
            extra=_BACKUP | _PORTS,
        ),
        "XH430-W210": _x(
            "x/xh430-w210",
            "00fc3614486cff48d2315ec82ffc578793703d3c",
            temperature=80,
            voltage=(95, 160),
            voltage_range=(95, 160),
            velocity=360,
            current=648,
            gains=_gains(1920, 100, 0, 0, 900),
            extra=_BACKUP,
            unsourced=(_NO_BACKUP_ROW, _NO_RANGE_COLUMN),
        ),
        "XH430-W350": _x(
            "x/xh430-w350",
            "028a13d257d7b1869b6f46af65d482c912b6852f",
            temperature=80,
            voltage=(95, 160),
            voltage_range=(95, 160),
            velocity=130,
            current=648,
            gains=_gains(1920, 100, 0, 0, 900),
            ranges={N.DRIVE_MODE: (0, 5)},
            extra=_BACKUP,
        ),
        "XH540-W150": _x(
            "x/xh540-w150",
            "01a2df191e6a2ec17e8265a88bda43659f384e41",
            temperature=80,
            voltage=(95, 160),
            voltage_range=(95, 160),
            velocity=300,
            current=2047,
            gains=_gains(1920, 100, 0, 0, 800),
            ranges={N.DRIVE_MODE: (0, 5)},
            extra=_BACKUP | _PORTS,
            unsourced=(_NO_BACKUP_ROW,),
        ),
        "XH540-W270": _x(
            "x/xh540-w270",
            "01ba9719bbc315fc6354fc93a08cba7d9505a107",
            temperature=80,
            voltage=(95, 160),
            voltage_range=(95, 160),
            velocity=167,
            current=2047,
            gains=_gains(1920, 100, 0, 0, 800),
            ranges={N.DRIVE_MODE: (0, 5)},
            extra=_BACKUP | _PORTS,
        ),
        "MX-28(2.0)": _x(
            "mx/mx-28-2",
            "07fe860b910b8617dc47c23cf342a2714d6cc748",
            temperature=80,
            voltage=(95, 160),
            voltage_range=(95, 160),
            velocity=380,
            gains=_gains(1920, 100, 0, 0, 850),
            unsourced=(_NO_RANGE_COLUMN,),
        ),
        "MX-64(2.0)": _x(
            "mx/mx-64-2",
            "07a9912506e0b6a13bdc1cff32128883691bf058",
            temperature=80,
            voltage=(95, 160),
            voltage_range=(95, 160),
            velocity=435,
            current=1941,
            gains=_gains(1920, 100, 0, 0, 850),
            unsourced=(_NO_RANGE_COLUMN,),
        ),
        "MX-106(2.0)": _x(
            "mx/mx-106-2",
            "07fe860b910b8617dc47c23cf342a2714d6cc748",
            temperature=80,
            voltage=(95, 160),
            voltage_range=(95, 160),
            velocity=360,
            current=2047,
            gains=_gains(1920, 100, 0, 0, 850),
            unsourced=(_NO_RANGE_COLUMN,),
        ),
        "AX-12A": ModelTable(
            source=f"{_REPO}07fe860b910b8617dc47c23cf342a2714d6cc748/docs/en/dxl/ax/ax-12a.md",
            defaults=MappingProxyType(
                {N.TEMPERATURE_LIMIT: 70, N.MAX_VOLTAGE_LIMIT: 140, N.MAX_TORQUE: 1023}
            ),
            unsourced=(
                "Min/Max Voltage Limit range: the text gives 50 ~ 250 (and 0x32 ~ 0x96, i.e. "
                "50 ~ 150); 50 ~ 250 is used",
            ),
        ),
        "AX-18A": ModelTable(
            source=f"{_REPO}07fe860b910b8617dc47c23cf342a2714d6cc748/docs/en/dxl/ax/ax-18a.md",
            defaults=MappingProxyType(
                {N.TEMPERATURE_LIMIT: 75, N.MAX_VOLTAGE_LIMIT: 140, N.MAX_TORQUE: 983}
            ),
        ),
        "MX-28": ModelTable(
            source=f"{_REPO}01179568a085cfc99bdad6e880e43fa871bd318a/docs/en/dxl/mx/mx-28.md",
            defaults=MappingProxyType(
                {N.TEMPERATURE_LIMIT: 80, N.MAX_VOLTAGE_LIMIT: 160, N.MAX_TORQUE: 1023}
            ),
        ),
        "MX-64": ModelTable(
            source=f"{_REPO}01179568a085cfc99bdad6e880e43fa871bd318a/docs/en/dxl/mx/mx-64.md",
            defaults=MappingProxyType(
                {N.TEMPERATURE_LIMIT: 80, N.MAX_VOLTAGE_LIMIT: 240, N.MAX_TORQUE: 1023}
            ),
            extra=frozenset({N.TORQUE_CTRL_MODE_ENABLE, N.GOAL_TORQUE}),
        ),
        "MX-106": ModelTable(
            source=f"{_REPO}01179568a085cfc99bdad6e880e43fa871bd318a/docs/en/dxl/mx/mx-106.md",
            defaults=MappingProxyType(
                {N.TEMPERATURE_LIMIT: 80, N.MAX_VOLTAGE_LIMIT: 160, N.MAX_TORQUE: 1023}
            ),
            extra=frozenset({N.DRIVE_MODE, N.TORQUE_CTRL_MODE_ENABLE, N.GOAL_TORQUE}),
        ),
        "XL-320": ModelTable(
            source=f"{_REPO}05aa1bdfdfada3bb45a260a5bc60c6da6c016d6d/docs/en/dxl/x/xl320.md",
            defaults=MappingProxyType(
                {
                    N.TEMPERATURE_LIMIT: 65,
                    N.MIN_VOLTAGE_LIMIT: 60,
                    N.MAX_VOLTAGE_LIMIT: 90,
                    N.MAX_TORQUE: 1023,
                    N.SHUTDOWN: 3,
                }
            ),
            unsourced=(
                "Sync Read and Bulk Read: the page does not say which Protocol 2.0 "
                "instructions the firmware answers; the plain (not fast) group reads are used",
                "Hardware Error Status(50) bits: the page gives none; those of Shutdown(18) "
                "are used (bit 0 overload, bit 1 overheating, bit 2 input voltage)",
            ),
        ),
    }
)
