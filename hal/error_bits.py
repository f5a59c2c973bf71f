"""Translating a protocol's status ERROR bits to and from the HAL's hardware-error flags.

Dynamixel Protocol 1.0 (``hilbot.hal.dynamixel.protocol``) and Feetech
(``hilbot.hal.feetech.protocol``) both report hardware errors as bits of the status
packet's ERROR byte; each names its bits in a table ``{bit: HardwareErrorFlags}``
(one flag per bit), and these two functions read and write the byte by that table.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from hilbot.hal.backend import HardwareErrorFlags

BitT = TypeVar("BitT", bound=int)


def flags_from_bits(error: int, table: Mapping[BitT, HardwareErrorFlags]) -> HardwareErrorFlags:
    """The flags the set bits of ``error`` stand for (bits not in ``table`` dropped)."""
    out = HardwareErrorFlags.NONE
    for bit, flag in table.items():
        if error & bit:
            out |= flag
    return out


def bits_from_flags(flags: HardwareErrorFlags, table: Mapping[BitT, HardwareErrorFlags]) -> int:
    """The ERROR bits that stand for ``flags`` (flags with no bit in ``table`` dropped)."""
    out = 0
    for bit, flag in table.items():
        if flags & flag:
            out |= int(bit)
    return out
