"""What the Dynamixel and Feetech ``ServoAccess`` share: registers read and written by name.

Each family's access finds the model answering at an id (``model_of``) and knows its own
register names, the sign of its Homing Offset and how its EEPROM is written; reading a
register, writing one inside its range and reading the calibration back are the same on
both, and live here.
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from hilbot.hal.errors import CommError, HalError
from hilbot.hal.registers import Register

NameT = TypeVar("NameT", bound=enum.Enum)
#: Times a servo's Present Position is asked for before its lost reply ends the reading.
#: Per servo: an 18-servo arm read one servo at a time loses the odd reply on a busy
#: host, and asking the whole arm again would as likely lose another.
PRESENT_ATTEMPTS = 4


class RegisterBus(Protocol):
    """The two calls calibration makes of a family's bus (``DynamixelBus``, ``FeetechBus``)."""

    def read(self, servo_id: int, address: int, length: int) -> tuple[bytes, int]:
        """``(data, error byte)`` of ``length`` bytes from ``address``."""
        ...

    def write(self, servo_id: int, address: int, data: bytes) -> int:
        """Write ``data`` at ``address``; the status error byte."""
        ...


class RegisterModel(Protocol[NameT]):
    """A model's register table by name (``ModelSpec``, ``FeetechModel``)."""

    @property
    def table(self) -> Mapping[NameT, Register]:
        """``{register name: Register}`` of the registers the model has."""
        ...

    def register(self, name: NameT) -> Register:
        """The register ``name``; ``KeyError`` when the model has none."""
        ...


BusT = TypeVar("BusT", bound=RegisterBus)
SpecT = TypeVar("SpecT", bound="RegisterModel[Any]")


class RegisterAccess(abc.ABC, Generic[BusT, SpecT, NameT]):
    """Calibration's view of one bus, by register name: the part every family shares.

    A family's subclass sets ``_error`` (what its failures raise) and the names of its
    Present Position, Homing Offset and Torque Enable registers, and implements
    ``model_of``, which fills ``_specs`` with the model found at an id.

    Args:
        bus: the family's open bus.
    """

    #: What a failed or rejected calibration access raises.
    _error: ClassVar[type[HalError]]
    #: The family's names of Present Position, Homing Offset and Torque Enable.
    _present_position: NameT
    _homing_offset: NameT
    _torque_enable: NameT

    def __init__(self, bus: BusT) -> None:
        self._bus = bus
        self._specs: dict[int, SpecT] = {}

    @abc.abstractmethod
    def model_of(self, servo_id: int) -> str | None:
        """The model name answering at ``servo_id``, ``None`` when nothing answers.

        Records the model in ``_specs`` when hilbot knows it.
        """

    def _spec(self, servo_id: int) -> SpecT:
        if servo_id not in self._specs and self.model_of(servo_id) is None:
            raise self._error(f"servo {servo_id} does not answer")
        if servo_id not in self._specs:
            raise self._error(f"servo {servo_id} is a model hilbot does not know")
        return self._specs[servo_id]

    def _read(self, servo_id: int, name: NameT) -> int:
        reg = self._spec(servo_id).register(name)
        return reg.decode(self._bus.read(servo_id, reg.address, reg.size)[0])

    def _write(self, servo_id: int, name: NameT, value: int) -> None:
        reg = self._spec(servo_id).register(name)
        if not reg.min <= value <= reg.max:
            raise self._error(
                f"servo {servo_id}: {reg.label} must be in {reg.min}..{reg.max}, got {value}"
            )
        self._bus.write(servo_id, reg.address, reg.encode(value))

    def _write_all(self, servo_id: int, names: Sequence[NameT], values: Sequence[int]) -> None:
        """Write ``values`` to the registers ``names``, in order, each checked for range."""
        for name, value in zip(names, values, strict=True):
            self._write(servo_id, name, value)

    def _check_back(self, servo_id: int, names: Sequence[NameT], values: Sequence[int]) -> None:
        """Read ``names`` back; raise on the first that does not hold what was written."""
        for name, value in zip(names, values, strict=True):
            back = self._read(servo_id, name)
            if back != value:
                raise self._error(
                    f"servo {servo_id}: {self._spec(servo_id).register(name).label} reads "
                    f"{back} after writing {value}"
                )

    def present_ticks(self, servo_ids: Sequence[int]) -> dict[int, int]:
        """Present Position of each servo [ticks] (Feetech's steps).

        A lost or corrupt reply asks that servo again (``PRESENT_ATTEMPTS`` in all).
        """
        return {i: self._present(i) for i in servo_ids}

    def _present(self, servo_id: int) -> int:
        for attempt in range(PRESENT_ATTEMPTS):
            try:
                return self._read(servo_id, self._present_position)
            except CommError:
                if attempt == PRESENT_ATTEMPTS - 1:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def homing_offset(self, servo_id: int) -> int:
        """The Homing Offset register (Feetech's "Ofs") [ticks]; 0 on models without one."""
        if self._homing_offset not in self._spec(servo_id).table:
            return 0
        return self._read(servo_id, self._homing_offset)

    def set_torque(self, servo_id: int, enabled: bool) -> None:
        """Torque Enable := 1 or 0."""
        self._write(servo_id, self._torque_enable, 1 if enabled else 0)
