"""Control-table registers as frozen data, for any servo family.

A servo family (``hal/dynamixel``, ``hal/feetech``) describes each model's control
table as :class:`Register` values: address, size, access, area, default and range.
Where the vendor's manual gives a range through other registers ("-Velocity Limit(44)
~ Velocity Limit(44)", "Min Position Limit(52) ~ Max Position Limit(48) in Position
Control Mode"), the register carries :class:`DependentRange` entries built from
:class:`Bound` values instead of constants, so that a firmware model can check a write
against the limit registers as they are at that moment.

Two kinds of range, as the firmware answers them:

- ``min`` / ``max``: the register's own range; a write outside it is a *range* error
  (Dynamixel 2.0 Data Range Error, 1.0 Range bit);
- ``dependent``: the range given by other registers, in the operating modes named;
  a write outside it is a *limit* error (Dynamixel 2.0 Data Limit Error).

Numbered series (Indirect Address 1 ~ 56) share one name and differ in ``index``.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal


class Access(enum.Enum):
    """Whether the host may write a register."""

    R = "R"
    RW = "RW"


class Area(enum.Enum):
    """EEPROM registers persist and are locked while torque is on; RAM ones are volatile."""

    EEPROM = "EEPROM"
    RAM = "RAM"


class Encoding(enum.Enum):
    """How a register's bytes map to an integer (byte order: ``Register.byte_order``)."""

    UNSIGNED = "unsigned"
    SIGNED = "signed"  # two's complement over the register size
    SIGN_MAGNITUDE_10 = "sign-magnitude bit 10"  # Dynamixel 1.0 speed/load: bit 10 is the sign
    SIGN_MAGNITUDE_11 = "sign-magnitude bit 11"  # Feetech STS Homing Offset: bit 11 is the sign
    SIGN_MAGNITUDE_15 = "sign-magnitude bit 15"  # Feetech STS: bit 15 is the sign


#: Sign bit of each sign-magnitude encoding.
_SIGN_BIT = {
    Encoding.SIGN_MAGNITUDE_10: 10,
    Encoding.SIGN_MAGNITUDE_11: 11,
    Encoding.SIGN_MAGNITUDE_15: 15,
}


@dataclass(frozen=True, slots=True)
class Bound:
    """One end of a range, read from another register when a write is checked.

    ``negate``: the bound is minus that register's value ("-PWM Limit(36)").
    """

    register: enum.Enum
    negate: bool = False

    def resolve(self, value_of: Callable[[enum.Enum], int]) -> int:
        """The bound's value, reading registers with ``value_of``."""
        value = value_of(self.register)
        return -value if self.negate else value


@dataclass(frozen=True, slots=True)
class DependentRange:
    """A range that other registers give, in the operating modes listed.

    Args:
        low: the lowest value, a constant or a :class:`Bound`.
        high: the highest value, a constant or a :class:`Bound`.
        modes: operating-mode values in which this range applies; empty: every mode.
    """

    low: int | Bound
    high: int | Bound
    modes: frozenset[int] = frozenset()

    def applies(self, mode: int) -> bool:
        """Whether this range applies in operating mode ``mode``."""
        return not self.modes or mode in self.modes

    def resolve(self, value_of: Callable[[enum.Enum], int]) -> tuple[int, int]:
        """``(low, high)`` with the bounds read through ``value_of``."""
        low = self.low if isinstance(self.low, int) else self.low.resolve(value_of)
        high = self.high if isinstance(self.high, int) else self.high.resolve(value_of)
        return low, high


@dataclass(frozen=True, slots=True)
class Register:
    """One control-table item.

    ``min`` and ``max`` are the raw range the servo accepts (a write outside is
    answered with a range error); both 0 means the manual gives none, and the full
    range of the encoding applies. ``dependent`` holds the ranges that other registers
    give (a write outside is a limit error). ``unit`` is the manual's unit text;
    ``index`` numbers the items of a series (Indirect Address 1 ~ 56), else 0.
    ``values``: where the manual lists the values a register takes (Operating Mode:
    those of the model's modes), only those are in range; empty: every value of
    ``min`` ~ ``max``. ``byte_order``: ``"little"`` (Dynamixel, Feetech STS) or
    ``"big"`` (Feetech SCS words).
    """

    name: enum.Enum
    address: int
    size: int
    access: Access
    area: Area
    unit: str = ""
    min: int = 0
    max: int = 0
    encoding: Encoding = Encoding.UNSIGNED
    default: int = 0
    dependent: tuple[DependentRange, ...] = ()
    index: int = 0
    values: frozenset[int] = frozenset()
    byte_order: Literal["little", "big"] = "little"
    #: First address after this register (a field, not a property: reads are hot).
    end: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.size not in (1, 2, 4):
            raise ValueError(f"{self.label}: size must be 1, 2 or 4, got {self.size}")
        object.__setattr__(self, "end", self.address + self.size)
        if self.max == 0 and self.min == 0:
            # Unbounded by the manual: allow the full raw range of the encoding.
            low, high = self.raw_range()
            object.__setattr__(self, "min", low)
            object.__setattr__(self, "max", high)

    def in_range(self, value: int) -> bool:
        """Whether ``value`` is within the register's own range (and listed values)."""
        if not self.min <= value <= self.max:
            return False
        return not self.values or value in self.values

    @property
    def label(self) -> str:
        """The manual's name, with the series number where there is one."""
        name = str(self.name.value)
        return f"{name} {self.index}" if self.index else name

    def raw_range(self) -> tuple[int, int]:
        """Every value the register's bytes can hold in its encoding."""
        bits = 8 * self.size
        if self.encoding is Encoding.SIGNED:
            return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
        sign_bit = _SIGN_BIT.get(self.encoding)
        if sign_bit is not None:
            return -((1 << sign_bit) - 1), (1 << sign_bit) - 1
        return 0, (1 << bits) - 1

    def limit_range(
        self, mode: int, value_of: Callable[[enum.Enum], int]
    ) -> tuple[int, int] | None:
        """The dependent range in force in operating mode ``mode``, or ``None``."""
        for rule in self.dependent:
            if rule.applies(mode):
                return rule.resolve(value_of)
        return None

    def decode(self, data: bytes) -> int:
        """Integer value of this register's bytes."""
        if len(data) != self.size:
            raise ValueError(f"{self.label}: {len(data)} bytes, expected {self.size}")
        if self.encoding is Encoding.SIGNED:
            return int.from_bytes(data, self.byte_order, signed=True)
        raw = int.from_bytes(data, self.byte_order)
        sign_bit = _SIGN_BIT.get(self.encoding)
        if sign_bit is not None:
            magnitude = raw & ((1 << sign_bit) - 1)
            return -magnitude if raw >> sign_bit & 1 else magnitude
        return raw

    def encode(self, value: int) -> bytes:
        """Bytes of ``value`` in this register's encoding (range is not checked here)."""
        if self.encoding is Encoding.SIGNED:
            return int(value).to_bytes(self.size, self.byte_order, signed=True)
        sign_bit = _SIGN_BIT.get(self.encoding)
        if sign_bit is not None:
            mask = (1 << sign_bit) - 1
            raw = min(abs(int(value)), mask) | ((1 << sign_bit) if value < 0 else 0)
            return raw.to_bytes(self.size, self.byte_order)
        return int(value).to_bytes(self.size, self.byte_order)


def check_layout(registers: Iterable[Register]) -> list[Register]:
    """The registers sorted by address; ``ValueError`` when two overlap."""
    ordered = sorted(registers, key=lambda r: r.address)
    for a, b in itertools.pairwise(ordered):
        if a.end > b.address:
            raise ValueError(f"{a.label} overlaps {b.label}")
    return ordered


def named_table(registers: Iterable[Register]) -> Mapping[enum.Enum, Register]:
    """A read-only mapping name -> register; ``ValueError`` on a duplicate or overlap."""
    ordered = check_layout(registers)
    names = [r.name for r in ordered]
    if len(set(names)) != len(names):
        raise ValueError("duplicate register in a control table")
    return MappingProxyType({r.name: r for r in ordered})
