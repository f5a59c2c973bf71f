"""One servo's control-table memory, with the firmware's access rules.

The memory is the byte array the protocol reads and writes, laid out by the model's
registers (``ModelSpec.registers()``: the named ones of its ``ControlTable`` and the
numbered Indirect Address / Data series). Writes go through the rules a servo
applies before it changes anything:

- every byte written must belong to a register, and a write must cover whole
  registers (else a data-length error); a byte of no register is an access error;
- read-only registers are refused (access error);
- EEPROM registers are locked while torque is on (access error, Protocol 2.0);
- values outside a register's own range are refused (data-range error);
- values outside the range other registers give it in the present operating mode
  (Goal Position within Min/Max Position Limit in position mode, Goal Velocity within
  ±Velocity Limit, ...) are refused (data-limit error);
- Indirect Data bytes stand for the bytes their Indirect Address registers name: a
  write to them is a write to those bytes, under the same rules.

A write that breaks any rule changes nothing. Reads may span any bytes of the table
(gaps read as zero, Indirect Data reads its targets), as on the real firmware.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import cast

from hilbot.hal import registers
from hilbot.hal.dynamixel.tables import Access, Area, ModelSpec, Register, RegisterName
from hilbot.hal.feetech.tables import FeetechModel, FeetechRegister

N = RegisterName


class WriteFault(enum.Enum):
    """Why a servo refused a write; the status packet reports it."""

    ACCESS = "access"  # read-only register, undefined address, or EEPROM with torque on
    RANGE = "range"  # a value outside the register's own range
    LIMIT = "limit"  # a value outside the range its limit registers give
    LENGTH = "length"  # the data does not cover whole registers


@dataclass(frozen=True, slots=True)
class WriteRefused:
    """A refused write: which register and why."""

    fault: WriteFault
    register: enum.Enum | None
    value: int | None = None


@dataclass(slots=True)
class CheckedWrite:
    """An accepted write: the registers it sets, and the bytes to store where.

    Iterating yields ``(register, value)`` pairs; ``chunks`` are ``(address, bytes)``
    in memory (an Indirect Data write lands at its targets).
    """

    values: list[tuple[Register, int]] = field(default_factory=list)
    chunks: list[tuple[int, bytes]] = field(default_factory=list)

    def __iter__(self) -> Iterator[tuple[Register, int]]:
        return iter(self.values)


class ControlTableMemory:
    """The control table of one servo as bytes, initialised to the model's defaults.

    Args:
        spec: the servo's model.
        servo_id: written into the ID register.
        baud_value: Baud Rate register value (the bus's rate), default the table's.
    """

    def __init__(self, spec: ModelSpec, servo_id: int, baud_value: int | None = None) -> None:
        self.spec = spec
        self.size = max(r.end for r in spec.registers())
        self.data = bytearray(self.size)
        self._owner: list[Register | None] = [None] * self.size
        #: Indirect Data address -> the address of its Indirect Address register.
        self._indirect: dict[int, int] = {}
        #: ``(start, end)`` of each Indirect Data block (a quick test for reads/writes).
        self._indirect_spans = tuple((a.data, a.data + a.count) for a in spec.indirect)
        self._indirect_low = min((a for a, _ in self._indirect_spans), default=self.size)
        self._indirect_high = max((b for _, b in self._indirect_spans), default=0)
        #: Dependent ranges in force, by register; dropped when a write reaches a byte
        #: of a register they read (``_bound_bytes``: limits and the operating mode).
        self._bounds: dict[enum.Enum, tuple[int, int] | None] = {}
        self._bound_bytes = frozenset(
            a
            for name in _bound_registers(spec)
            for a in range(spec.table[name].address, spec.table[name].end)
        )
        #: Bumped by every write except the firmware's present-value updates, so that
        #: cached settings (ID, baud rate, ...) know when to reload.
        self.generation = 0
        for reg in spec.registers():
            for a in range(reg.address, reg.end):
                self._owner[a] = reg
        for area in spec.indirect:
            for i in range(area.count):
                self._indirect[area.data + i] = area.address + 2 * i
        self.reset(servo_id, baud_value, ram_only=False)

    def __iter__(self) -> Iterator[Register]:
        return iter(self.spec.table.values())

    def reset(self, servo_id: int, baud_value: int | None, *, ram_only: bool) -> None:
        """Load defaults: RAM only (a reboot) or everything (factory reset / power-up)."""
        for reg in self.spec.registers():
            if ram_only and reg.area is not Area.RAM:
                continue
            self.data[reg.address : reg.end] = reg.encode(reg.default)
        self.generation += 1
        self._bounds.clear()
        if N.TORQUE_LIMIT in self.spec.table and N.MAX_TORQUE in self.spec.table:
            # 1.0: "When the power is turned on, Torque Limit uses [Max Torque] as the
            # initial value" (e-manual, Max Torque(14)).
            self.set(N.TORQUE_LIMIT, self.get(N.MAX_TORQUE))
        self.reset_goal_limits()
        if not ram_only:
            self.set(N.MODEL_NUMBER, self.spec.model_number)
            self.set(N.ID, servo_id)
            if N.FIRMWARE_VERSION in self.spec.table:
                self.set(N.FIRMWARE_VERSION, max(self.spec.fast_read_min_firmware, 45))
            if baud_value is not None:
                self.set(N.BAUD_RATE, baud_value)

    def reset_goal_limits(self) -> None:
        """Goal PWM := PWM Limit and Goal Current := Current Limit, where the model has them.

        The e-manual's value range of Goal PWM(100) gives "Initial Value of PWM Limit(36)",
        and a change of Operating Mode(11) resets "Goal PWM(100), Goal Current(102) ... to
        PWM Limit(36), Current Limit(38) respectively" (X series, MX(2.0), P series).
        """
        for goal, limit in ((N.GOAL_PWM, N.PWM_LIMIT), (N.GOAL_CURRENT, N.CURRENT_LIMIT)):
            if goal in self.spec.table and limit in self.spec.table:
                self.set(goal, self.get(limit))

    def has(self, name: RegisterName) -> bool:
        """Whether the model has register ``name``."""
        return name in self.spec.table

    def get(self, name: enum.Enum) -> int:
        """Decoded value of register ``name``."""
        reg = self.spec.table[cast(RegisterName, name)]  # Bounds name Dynamixel registers
        return reg.decode(bytes(self.data[reg.address : reg.end]))

    def set(self, name: RegisterName, value: int) -> None:
        """Store ``value`` in register ``name`` without any rule (the firmware's own writes)."""
        reg = self.spec.table[name]
        self.data[reg.address : reg.end] = reg.encode(value)
        self.generation += 1
        self._bounds.clear()

    def set_clamped(self, reg: Register, value: int) -> None:
        """Store ``value`` in ``reg``, clamped to the register's raw range."""
        self.data[reg.address : reg.end] = reg.encode(min(max(int(value), reg.min), reg.max))

    def set_if_present(self, name: RegisterName, value: int) -> None:
        """``set`` when the model has the register; clamps to the register's raw range."""
        reg = self.spec.table.get(name)
        if reg is not None:
            self.data[reg.address : reg.end] = reg.encode(min(max(int(value), reg.min), reg.max))

    def operating_mode(self) -> int:
        """The operating mode the range rules use (see ``ModelSpec.operating_mode``)."""
        return self.spec.operating_mode(self.get)

    # ------------------------------------------------------------------ indirection

    def indirect_target(self, address: int) -> int | None:
        """The address Indirect Data byte ``address`` stands for, or ``None``."""
        at = self._indirect.get(address)
        if at is None:
            return None
        return int.from_bytes(self.data[at : at + 2], "little")

    def touches_indirect(self, address: int, length: int) -> bool:
        """Whether ``[address, +length)`` holds an Indirect Data byte."""
        end = address + length
        if end <= self._indirect_low or address >= self._indirect_high:
            return False
        return any(start < end and address < stop for start, stop in self._indirect_spans)

    def read(self, address: int, length: int) -> bytes | None:
        """Bytes ``[address, address + length)``, or ``None`` when outside the table."""
        if address < 0 or length < 0 or address + length > self.size:
            return None
        data = bytearray(self.data[address : address + length])
        if self.touches_indirect(address, length):
            for i in range(length):
                target = self.indirect_target(address + i)
                if target is not None and 0 <= target < self.size:
                    data[i] = self.data[target]
        return bytes(data)

    # ------------------------------------------------------------------ writes

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
    ) -> CheckedWrite | WriteRefused:
        """Validate a write; return what it sets, or why it is refused."""
        regs = self.registers_in(address, len(data))
        if isinstance(regs, WriteRefused):
            return regs
        out = CheckedWrite()
        direct_start = address
        for reg in regs:
            start = reg.address - address
            chunk = bytes(data[start : start + reg.size])
            if reg.name is N.INDIRECT_DATA:
                out.chunks.append((direct_start, bytes(data[direct_start - address : start])))
                direct_start = reg.end
                continue
            if reg.access is not Access.RW:
                return WriteRefused(WriteFault.ACCESS, reg.name)
            if eeprom_lock and torque_on and reg.area is Area.EEPROM:
                return WriteRefused(WriteFault.ACCESS, reg.name)
            value = reg.decode(chunk)
            if not reg.in_range(value):
                return WriteRefused(WriteFault.RANGE, reg.name, value)
            if reg.dependent:
                bounds = self._limit_range(reg)
                if bounds is not None and not bounds[0] <= value <= bounds[1]:
                    return WriteRefused(WriteFault.LIMIT, reg.name, value)
            out.values.append((reg, value))
        out.chunks.append((direct_start, bytes(data[direct_start - address :])))
        out.chunks = [(a, b) for a, b in out.chunks if b]
        if not self.touches_indirect(address, len(data)):
            return out
        indirect = self._check_indirect(address, data, torque_on=torque_on, lock=eeprom_lock)
        if isinstance(indirect, WriteRefused):
            return indirect
        out.values += indirect.values
        out.chunks += indirect.chunks
        return out

    def _check_indirect(
        self, address: int, data: bytes, *, torque_on: bool, lock: bool
    ) -> CheckedWrite | WriteRefused:
        """The writes that Indirect Data bytes in ``data`` stand for, checked as writes."""
        out = CheckedWrite()
        run: list[tuple[int, int]] = []  # (target address, byte), contiguous
        for i, byte in enumerate(data):
            target = self.indirect_target(address + i)
            if target is None:
                continue
            if run and target != run[-1][0] + 1:
                refused = self._add_run(out, run, torque_on=torque_on, lock=lock)
                if refused is not None:
                    return refused
                run = []
            run.append((target, byte))
        refused = self._add_run(out, run, torque_on=torque_on, lock=lock) if run else None
        return out if refused is None else refused

    def _add_run(
        self, out: CheckedWrite, run: list[tuple[int, int]], *, torque_on: bool, lock: bool
    ) -> WriteRefused | None:
        start = run[0][0]
        payload = bytes(b for _, b in run)
        if self.touches_indirect(start, len(payload)):
            return WriteRefused(WriteFault.ACCESS, N.INDIRECT_DATA)  # no chains of indirection
        checked = self.check_write(start, payload, torque_on=torque_on, eeprom_lock=lock)
        if isinstance(checked, WriteRefused):
            return checked
        out.values += checked.values
        out.chunks += checked.chunks
        return None

    def _limit_range(self, reg: Register) -> tuple[int, int] | None:
        """``reg``'s dependent range in force now (cached until a limit changes)."""
        try:
            return self._bounds[reg.name]
        except KeyError:
            bounds = reg.limit_range(self.operating_mode(), self.get)
            self._bounds[reg.name] = bounds
            return bounds

    def store(self, checked: CheckedWrite) -> None:
        """Write what ``check_write`` accepted."""
        for address, data in checked.chunks:
            self.data[address : address + len(data)] = data
            if self._bounds and not self._bound_bytes.isdisjoint(
                range(address, address + len(data))
            ):
                self._bounds.clear()
        self.generation += 1


def _bound_registers(spec: ModelSpec) -> set[RegisterName]:
    """The registers any dependent range reads, and those the operating mode comes from."""
    names = {N.OPERATING_MODE, N.CW_ANGLE_LIMIT, N.CCW_ANGLE_LIMIT}
    for reg in spec.registers():
        for rule in reg.dependent:
            for end in (rule.low, rule.high):
                if not isinstance(end, int):
                    names.add(cast(RegisterName, end.register))
    return {name for name in names if name in spec.table}


# ------------------------------------------------------------------ feetech_memory
# One Feetech servo's memory table as bytes, with its EEPROM copy and write rules.
F = FeetechRegister
SIZE = 256  # addresses are one byte


@dataclass(frozen=True, slots=True)
class Written:
    """A register a write changed, with its new value."""

    register: registers.Register
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
        self._owner: list[registers.Register | None] = [None] * SIZE
        for reg in spec.table.values():
            for a in range(reg.address, reg.end):
                self._owner[a] = reg
        #: Bumped by every write that is not a present-value update.
        self.generation = 0
        self.saved = bytearray(SIZE)
        self.factory_reset(servo_id)
        if baud_value is not None:
            self.set(F.BAUD_RATE, baud_value)
        self.saved[:] = self.data
        self.power_up()

    # ------------------------------------------------------------------ lifecycle

    def factory_reset(self, servo_id: int) -> None:
        """Every register, EEPROM and saved copy included, back to the table's default."""
        for reg in self.spec.table.values():
            self.data[reg.address : reg.end] = reg.encode(reg.default)
        self.set(F.ID, servo_id)
        self.saved[:] = self.data
        self.generation += 1

    def power_up(self) -> None:
        """EEPROM from its saved copy, RAM to defaults, Torque Limit := Max Torque."""
        for reg in self.spec.table.values():
            if reg.area is Area.EEPROM:
                self.data[reg.address : reg.end] = self.saved[reg.address : reg.end]
            else:
                self.data[reg.address : reg.end] = reg.encode(reg.default)
        if F.TORQUE_LIMIT in self.spec.table:
            # "Power on assigned to address 48 torque limit" (memory table, Max Torque).
            self.set(F.TORQUE_LIMIT, self.get(F.MAX_TORQUE))
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

    def set_clamped(self, reg: registers.Register, value: int) -> None:
        """Store a present value, clamped to the register's raw range."""
        self.data[reg.address : reg.end] = reg.encode(min(max(int(value), reg.min), reg.max))

    def read(self, address: int, length: int) -> bytes:
        """Bytes ``[address, address + length)``; past the last address, zeros."""
        data = bytes(self.data[address : address + length])
        return data.ljust(length, b"\0")

    def write(self, address: int, data: bytes) -> list[Written]:
        """Apply a write under the rules above; return the registers it changed."""
        locked = self.get(F.LOCK) != 0
        touched: dict[int, registers.Register] = {}
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
