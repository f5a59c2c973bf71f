"""One servo's control-table memory, with the firmware's access rules.

The memory is the byte array the protocol reads and writes, laid out by the model's
``ControlTable`` (``hilbot.hal.dynamixel.tables``). Writes go through the rules a
servo applies before it changes anything:

- every byte written must belong to a register, and a write must cover whole
  registers (else a data-length error);
- read-only registers are refused (access error);
- EEPROM registers are locked while torque is on (access error, Protocol 2.0);
- values outside a register's range are refused (data-range error).

A write that breaks any rule changes nothing. Reads may span any bytes of the table
(gaps read as zero), as on the real firmware.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass

from hilbot.hal.dynamixel.tables import Access, Area, ModelSpec, Register, RegisterName


class WriteFault(enum.Enum):
    """Why a servo refused a write; the status packet reports it."""

    ACCESS = "access"  # read-only register, undefined address, or EEPROM with torque on
    RANGE = "range"  # a value outside the register's range
    LENGTH = "length"  # the data does not cover whole registers


@dataclass(frozen=True, slots=True)
class WriteRefused:
    """A refused write: which register and why."""

    fault: WriteFault
    register: RegisterName | None
    value: int | None = None


class ControlTableMemory:
    """The control table of one servo as bytes, initialised to the model's defaults.

    Args:
        spec: the servo's model.
        servo_id: written into the ID register.
        baud_value: Baud Rate register value (the bus's rate), default the table's.
    """

    def __init__(self, spec: ModelSpec, servo_id: int, baud_value: int | None = None) -> None:
        self.spec = spec
        self.size = max(r.end for r in spec.table.values())
        self.data = bytearray(self.size)
        self._owner: list[Register | None] = [None] * self.size
        #: Bumped by every write except the firmware's present-value updates, so that
        #: cached settings (ID, baud rate, ...) know when to reload.
        self.generation = 0
        for reg in spec.table.values():
            for a in range(reg.address, reg.end):
                self._owner[a] = reg
        self.reset(servo_id, baud_value, ram_only=False)

    def __iter__(self) -> Iterator[Register]:
        return iter(self.spec.table.values())

    def reset(self, servo_id: int, baud_value: int | None, *, ram_only: bool) -> None:
        """Load defaults: RAM only (a reboot) or everything (factory reset / power-up)."""
        for reg in self.spec.table.values():
            if ram_only and reg.area is not Area.RAM:
                continue
            self.set(reg.name, reg.default)
        if not ram_only:
            self.set(RegisterName.MODEL_NUMBER, self.spec.model_number)
            self.set(RegisterName.ID, servo_id)
            if RegisterName.FIRMWARE_VERSION in self.spec.table:
                self.set(RegisterName.FIRMWARE_VERSION, max(self.spec.fast_read_min_firmware, 45))
            if baud_value is not None:
                self.set(RegisterName.BAUD_RATE, baud_value)

    def has(self, name: RegisterName) -> bool:
        """Whether the model has register ``name``."""
        return name in self.spec.table

    def get(self, name: RegisterName) -> int:
        """Decoded value of register ``name``."""
        reg = self.spec.table[name]
        return reg.decode(bytes(self.data[reg.address : reg.end]))

    def set(self, name: RegisterName, value: int) -> None:
        """Store ``value`` in register ``name`` without any rule (the firmware's own writes)."""
        reg = self.spec.table[name]
        self.data[reg.address : reg.end] = reg.encode(value)
        self.generation += 1

    def set_clamped(self, reg: Register, value: int) -> None:
        """Store ``value`` in ``reg``, clamped to the register's raw range."""
        self.data[reg.address : reg.end] = reg.encode(min(max(int(value), reg.min), reg.max))

    def set_if_present(self, name: RegisterName, value: int) -> None:
        """``set`` when the model has the register; clamps to the register's raw range."""
        reg = self.spec.table.get(name)
        if reg is not None:
            self.data[reg.address : reg.end] = reg.encode(min(max(int(value), reg.min), reg.max))

    def read(self, address: int, length: int) -> bytes | None:
        """Bytes ``[address, address + length)``, or ``None`` when outside the table."""
        if address < 0 or length < 0 or address + length > self.size:
            return None
        return bytes(self.data[address : address + length])

    def registers_in(self, address: int, length: int) -> list[Register] | WriteRefused:
        """The registers a write of ``length`` bytes at ``address`` covers exactly."""
        if address < 0 or length <= 0 or address + length > self.size:
            return WriteRefused(WriteFault.ACCESS, None)
        regs: list[Register] = []
        a = address
        while a < address + length:
            reg = self._owner[a]
            if reg is None:
                return WriteRefused(WriteFault.ACCESS, None)
            if reg.address != a or reg.end > address + length:
                return WriteRefused(WriteFault.LENGTH, reg.name)
            regs.append(reg)
            a = reg.end
        return regs

    def check_write(
        self, address: int, data: bytes, *, torque_on: bool, eeprom_lock: bool
    ) -> list[tuple[Register, int]] | WriteRefused:
        """Validate a write; return ``(register, value)`` pairs, or why it is refused."""
        regs = self.registers_in(address, len(data))
        if isinstance(regs, WriteRefused):
            return regs
        out: list[tuple[Register, int]] = []
        for reg in regs:
            if reg.access is not Access.RW:
                return WriteRefused(WriteFault.ACCESS, reg.name)
            if eeprom_lock and torque_on and reg.area is Area.EEPROM:
                return WriteRefused(WriteFault.ACCESS, reg.name)
            start = reg.address - address
            value = reg.decode(bytes(data[start : start + reg.size]))
            if not reg.min <= value <= reg.max:
                return WriteRefused(WriteFault.RANGE, reg.name, value)
            out.append((reg, value))
        return out

    def store(self, address: int, data: bytes) -> None:
        """Write bytes that ``check_write`` accepted."""
        self.data[address : address + len(data)] = data
        self.generation += 1
