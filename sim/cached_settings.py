"""The settings a simulated servo's firmware consults on every packet, cached.

Both servo firmwares (``hilbot.sim.virtual_servo`` for Dynamixel,
``hilbot.sim.feetech_servo`` for Feetech) answer every packet by their ID, bit rate,
return delay and status level. Reads are hot, so :class:`CachedSettings` keeps those
values and reloads them only after the memory's ``generation`` moved on (a write, a
reset). A subclass loads them from its own registers in ``_load_config``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Protocol

from hilbot.hal.backend import HardwareErrorFlags
from hilbot.sim.servo_model import ServoModel


class GenerationalMemory(Protocol):
    """A servo memory that counts the changes to it."""

    @property
    def generation(self) -> int:
        """Moves on whenever a register changes."""
        ...


class CachedSettings(ABC):
    """The cached ID, bit rate, return delay and status level of one simulated servo.

    A subclass sets ``memory``, ``model`` and ``index``, and its ``_load_config`` sets
    ``_generation`` (from ``memory``), ``_id``, ``_baudrate``, ``_return_delay`` and
    ``_status_return_level``.
    """

    memory: GenerationalMemory
    model: ServoModel
    index: int
    _generation: int
    _id: int
    _baudrate: int | None
    _return_delay: float
    _status_return_level: int

    @abstractmethod
    def _load_config(self) -> None:
        """Cache the registers the firmware consults on every packet."""

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
