"""What both simulated servo firmwares share: power-up and the live registers.

Both firmwares (``hilbot.sim.virtual_servo`` for Dynamixel, ``hilbot.sim.feetech_servo``
for Feetech) power up the same way (memory at its defaults with the bus's Baud Rate and
Return Delay Time, settings loaded, EEPROM limits applied, goal := present position)
and refresh their present-value registers from the dynamics model before a read.
Both answer every packet by their ID, bit rate, return delay and status level; reads are
hot, so those are cached and reloaded only after the memory's ``generation`` moved on
(a write, a reset). :class:`ServoFirmware` does that; a subclass brings its memory, its
own state, its live registers and how it applies its EEPROM and resets its goal.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, Generic, NamedTuple, Protocol, TypeVar

from hilbot.hal.backend import HardwareErrorFlags
from hilbot.hal.registers import Register
from hilbot.sim.servo_model import ServoModel


class FirmwareSpec(Protocol):
    """What the shared firmware needs of a servo model."""

    @property
    def baud_rates(self) -> Mapping[int, int]:
        """Baud Rate register value -> bit rate [bit/s]."""
        ...


class SettingNames(NamedTuple):
    """A family's names of the registers :class:`ServoFirmware` caches for every packet."""

    id: enum.Enum
    baud_rate: enum.Enum
    return_delay_time: enum.Enum
    status_level: enum.Enum


SpecT = TypeVar("SpecT", bound=FirmwareSpec)
RegT = TypeVar("RegT", bound=Register)
RegT_contra = TypeVar("RegT_contra", bound=Register, contravariant=True)
#: A live register's value source: bus time [s] -> register value.
LiveSource = Callable[[float], int]


class LiveMemory(Protocol[RegT_contra]):
    """A servo memory the model's present values are copied into."""

    @property
    def generation(self) -> int:
        """Moves on whenever a register changes."""
        ...

    def get(self, name: Any) -> int:
        """The value of the register ``name`` (one of the family's register names)."""
        ...

    def set_clamped(self, reg: RegT_contra, value: int) -> None:
        """Store ``value`` in ``reg``, clamped to what the register can hold."""
        ...


class ServoFirmware(ABC, Generic[SpecT, RegT]):
    """One simulated servo's firmware, from power-up on.

    A subclass sets ``settings`` and ``return_delay_unit`` and implements
    :meth:`_new_memory`, :meth:`_power_up_return_delay`, :meth:`_set_up`,
    :meth:`_load_own_config`, :meth:`_live_registers`, :meth:`_apply_eeprom` and
    :meth:`_reset_goal`.

    Args:
        spec: the model.
        servo_id: ID at first power-up.
        model: the dynamics model shared by the bus.
        index: this servo's index in ``model``.
        baud_value: Baud Rate register value at first power-up.
        return_delay_time: Return Delay Time register value at first power-up [2 µs],
            or ``None`` for the model's default.
    """

    #: The family's names of the ID, Baud Rate, Return Delay Time and status level registers.
    settings: ClassVar[SettingNames]
    #: The family's Return Delay Time unit [s] (its HAL's ``timing.RETURN_DELAY_UNIT``).
    return_delay_unit: ClassVar[float]
    memory: LiveMemory[RegT]
    _generation: int  # the memory's generation when the settings below were cached
    _id: int
    _baudrate: int | None
    _return_delay: float
    _status_return_level: int

    def __init__(
        self,
        spec: SpecT,
        servo_id: int,
        model: ServoModel,
        index: int,
        *,
        baud_value: int | None = None,
        return_delay_time: int | None = None,
    ) -> None:
        self.spec = spec
        self.model = model
        self.index = index
        self.memory = self._new_memory(servo_id, baud_value)
        if return_delay_time is not None:
            self._power_up_return_delay(return_delay_time)
        #: ``(address, data)`` of a REG WRITE waiting for ACTION.
        self.pending_write: tuple[int, bytes] | None = None
        self._set_up()
        self._live = self._live_registers()
        self._load_config()
        self._apply_eeprom()
        self._reset_goal()

    @abstractmethod
    def _new_memory(self, servo_id: int, baud_value: int | None) -> LiveMemory[RegT]:
        """The memory at first power-up, at the model's defaults but ID and Baud Rate."""

    @abstractmethod
    def _power_up_return_delay(self, value: int) -> None:
        """Make ``value`` [2 µs] the Return Delay Time the servo powers up with."""

    def _load_config(self) -> None:
        """Cache the registers the firmware consults on every packet (reads are hot)."""
        mem, names = self.memory, self.settings
        self._generation = mem.generation
        self._id = mem.get(names.id)
        self._baudrate = self.spec.baud_rates.get(mem.get(names.baud_rate))
        self._return_delay = mem.get(names.return_delay_time) * self.return_delay_unit
        self._status_return_level = mem.get(names.status_level)
        self._load_own_config()

    def _check_config(self) -> None:
        if self.memory.generation != self._generation:
            self._load_config()

    @property
    def id(self) -> int:
        """The ID register."""
        self._check_config()
        return self._id

    @property
    def baudrate(self) -> int | None:
        """Bit rate the servo listens at [bit/s], ``None`` for an unlisted register value."""
        self._check_config()
        return self._baudrate

    @property
    def return_delay(self) -> float:
        """Return Delay Time [s] (register value × 2 µs)."""
        self._check_config()
        return self._return_delay

    @property
    def status_return_level(self) -> int:
        """Which instructions are answered; the levels are the protocol's (see subclass)."""
        self._check_config()
        return self._status_return_level

    @property
    def hardware_error(self) -> HardwareErrorFlags:
        """The latched hardware errors."""
        return HardwareErrorFlags(int(self.model.hardware_error[self.index]))

    @abstractmethod
    def _load_own_config(self) -> None:
        """Cache the family's own settings (offset, limits, mode); ``_load_config`` calls it."""

    @abstractmethod
    def _set_up(self) -> None:
        """Set the subclass's own state; runs before the live registers are listed."""

    @abstractmethod
    def _live_registers(self) -> Sequence[tuple[RegT, LiveSource]]:
        """The registers the firmware keeps up to date, each with its value source."""

    @abstractmethod
    def _apply_eeprom(self) -> None:
        """Copy the limit and shutdown registers into the model."""

    @abstractmethod
    def _reset_goal(self) -> None:
        """Goal Position := Present Position, as at power-up."""

    def refresh(self, now: float, address: int = 0, length: int | None = None) -> None:
        """Copy the model's present values into the registers in ``[address, +length)``.

        ``length`` ``None`` refreshes every live register from ``address`` on.
        """
        self._check_config()
        for reg, value in self._live:
            if (length is None or reg.address < address + length) and address < reg.end:
                self.memory.set_clamped(reg, value(now))


def eeprom_spans(registers: Iterable[Register]) -> tuple[tuple[int, int], ...]:
    """The ``(start, end)`` address runs the ``registers`` cover, merged and sorted."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted((r.address, r.end) for r in registers):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return tuple(merged)


def masked(data: bytes | bytearray, spans: Sequence[tuple[int, int]]) -> bytes:
    """``data`` with every byte outside ``spans`` zero (an EEPROM image)."""
    out = bytearray(len(data))
    for start, end in spans:
        out[start:end] = data[start:end]
    return bytes(out)
