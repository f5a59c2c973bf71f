"""The glitch fault on a virtual bus: a reply's Present Position rewritten, packet valid.

Both virtual buses (Dynamixel and Feetech) pass the data a servo reads through
:func:`glitch_read` before the status packet is encoded, so the CRC (Protocol 2.0) or
checksum (Protocol 1.0, Feetech) is computed over the rewritten bytes: the host sees
a well-formed reply whose position is wrong, as an encoder glitch or two bit flips
that cancel in an 8-bit checksum would give. See ``ServoFaults.glitch``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, Protocol

from hilbot.hal.registers import Encoding, Register
from hilbot.sim.faults import ServoFaults


class PositionTable(Protocol):
    """What glitching a read needs of a servo's model (Dynamixel or Feetech)."""

    @property
    def table(self) -> Mapping[Any, Register]:
        """The model's named registers."""
        ...

    @property
    def radians_per_tick(self) -> float:
        """Shaft radians per position tick."""
        ...


def _value_range(reg: Register) -> tuple[int, int]:
    """The values ``reg``'s bytes can hold."""
    bits = 8 * reg.size
    if reg.encoding is Encoding.SIGNED:
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    sign_bit = {
        Encoding.SIGN_MAGNITUDE_10: 10,
        Encoding.SIGN_MAGNITUDE_11: 11,
        Encoding.SIGN_MAGNITUDE_15: 15,
    }.get(reg.encoding)
    if sign_bit is not None:
        return -((1 << sign_bit) - 1), (1 << sign_bit) - 1
    return 0, (1 << bits) - 1


def glitch_read(
    faults: ServoFaults | None,
    model: PositionTable,
    position: enum.Enum,
    address: int,
    data: bytes,
) -> bytes:
    """``data`` read at ``address``, its Present Position moved by a pending glitch.

    A read that does not hold the whole Present Position register is returned as it
    is and uses up no glitch.

    Args:
        faults: the servo's injected faults, ``None`` for none.
        model: the servo's model (its register table and tick size).
        position: the family's Present Position register name.
        address: where the read started.
        data: the bytes read.
    """
    if faults is None or not faults.glitching:
        return data
    reg = model.table.get(position)
    if reg is None:
        return data
    start = reg.address - address
    if start < 0 or start + reg.size > len(data):
        return data
    ticks = round(faults.take_glitch(model.radians_per_tick))
    if not ticks:
        return data
    low, high = _value_range(reg)
    value = min(max(reg.decode(data[start : start + reg.size]) + ticks, low), high)
    return data[:start] + reg.encode(value) + data[start + reg.size :]
