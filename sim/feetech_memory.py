"""One Feetech servo's memory table as bytes, with its EEPROM copy and write rules.

The firmware keeps a working copy of the whole table (what reads return and what the
servo acts on) and, for the EEPROM area, a saved copy that survives power-off. What a
write does, per byte, as the memory tables describe it or, where they are silent,
as chosen here (docs/simulation.md, "Feetech"):

- a byte of a read-only register, or of no register, is ignored;
- a register whose new value lies outside its own range keeps its old value
  (the tables give ranges, not what the firmware answers; no status bit exists for it);
- an EEPROM register takes its new value at once; it is also saved when Lock reads 0
  at the time of the write, and lost at the next power-up when Lock is 1
  (memory table, "Lock flag");
- words are in the series' byte order (``Register.byte_order``).

Reads may span any of the 256 addresses; bytes of no register read as zero.
"""

from __future__ import annotations

from dataclasses import dataclass

from hilbot.hal.feetech.tables import FeetechModel, FeetechRegister
from hilbot.hal.registers import Access, Area, Register

N = FeetechRegister
SIZE = 256  # addresses are one byte


@dataclass(frozen=True, slots=True)
class Written:
    """A register a write changed, with its new value."""

    register: Register
    value: int


class FeetechMemory:
    """Working and saved memory of one servo.

    Args:
        spec: the model.
        servo_id: ID at first power-up.
        baud_value: Baud Rate register value at first power-up; default the table's.
    """

    def __init__(self, spec: FeetechModel, servo_id: int, baud_value: int | None = None) -> None:
        self.spec = spec
        self.data = bytearray(SIZE)
        self._owner: list[Register | None] = [None] * SIZE
        for reg in spec.table.values():
            for a in range(reg.address, reg.end):
                self._owner[a] = reg
        #: Bumped by every write that is not a present-value update.
        self.generation = 0
        self.saved = bytearray(SIZE)
        self.factory_reset(servo_id)
        if baud_value is not None:
            self.set(N.BAUD_RATE, baud_value)
        self.saved[:] = self.data
        self.power_up()

    # ------------------------------------------------------------------ lifecycle

    def factory_reset(self, servo_id: int) -> None:
        """Every register, EEPROM and saved copy included, back to the table's default."""
        for reg in self.spec.table.values():
            self.data[reg.address : reg.end] = reg.encode(reg.default)
        self.set(N.ID, servo_id)
        self.saved[:] = self.data
        self.generation += 1

    def power_up(self) -> None:
        """EEPROM from its saved copy, RAM to defaults, Torque Limit := Max Torque."""
        for reg in self.spec.table.values():
            if reg.area is Area.EEPROM:
                self.data[reg.address : reg.end] = self.saved[reg.address : reg.end]
            else:
                self.data[reg.address : reg.end] = reg.encode(reg.default)
        if N.TORQUE_LIMIT in self.spec.table:
            # "Power on assigned to address 48 torque limit" (memory table, Max Torque).
            self.set(N.TORQUE_LIMIT, self.get(N.MAX_TORQUE))
        self.generation += 1

    # ------------------------------------------------------------------ access

    def get(self, name: FeetechRegister) -> int:
        """Decoded value of register ``name``."""
        reg = self.spec.table[name]
        return reg.decode(bytes(self.data[reg.address : reg.end]))

    def set(self, name: FeetechRegister, value: int) -> None:
        """Store ``value`` without any rule (the firmware's own writes)."""
        reg = self.spec.table[name]
        self.data[reg.address : reg.end] = reg.encode(value)
        self.generation += 1

    def save(self, name: FeetechRegister) -> None:
        """Copy register ``name`` to the saved EEPROM (the firmware's own saves)."""
        reg = self.spec.table[name]
        self.saved[reg.address : reg.end] = self.data[reg.address : reg.end]

    def set_clamped(self, reg: Register, value: int) -> None:
        """Store a present value, clamped to the register's raw range."""
        self.data[reg.address : reg.end] = reg.encode(min(max(int(value), reg.min), reg.max))

    def read(self, address: int, length: int) -> bytes:
        """Bytes ``[address, address + length)``; past the last address, zeros."""
        data = bytes(self.data[address : address + length])
        return data.ljust(length, b"\0")

    def write(self, address: int, data: bytes) -> list[Written]:
        """Apply a write under the rules above; return the registers it changed."""
        locked = self.get(N.LOCK) != 0
        touched: dict[int, Register] = {}
        for a in range(address, min(address + len(data), SIZE)):
            reg = self._owner[a]
            if reg is not None and reg.access is Access.RW:
                touched[reg.address] = reg
        if not touched:
            return []
        new = bytearray(self.data)
        end = min(address + len(data), SIZE)
        new[address:end] = data[: end - address]
        out: list[Written] = []
        for reg in touched.values():
            value = reg.decode(bytes(new[reg.address : reg.end]))
            if not reg.in_range(value):
                continue  # the register keeps its old value
            self.data[reg.address : reg.end] = new[reg.address : reg.end]
            if reg.area is Area.EEPROM and not locked:
                self.saved[reg.address : reg.end] = new[reg.address : reg.end]
            out.append(Written(reg, value))
        self.generation += 1
        return out
