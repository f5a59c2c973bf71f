"""``ServoAccess`` on a Dynamixel bus: what calibration reads and writes, by register name."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

from hilbot.hal.calibration import Geometry
from hilbot.hal.dynamixel.bus import DynamixelBus
from hilbot.hal.dynamixel.startup import patient_ping
from hilbot.hal.dynamixel.tables import ModelSpec, RegisterName, model_by_number
from hilbot.hal.errors import HalError
from hilbot.hal.mapping import BusSpec

N = RegisterName


class CalibrationWriteError(HalError):
    """Writing a servo's calibration failed or did not take: names the servo and register."""


class DynamixelAccess:
    """Calibration's view of one Dynamixel bus (Protocol 2.0 servos with a Homing Offset).

    Args:
        bus: an open :class:`DynamixelBus`.
    """

    homing_sign = 1  # e-manual: Present Position = actual position + Homing Offset

    def __init__(self, bus: DynamixelBus) -> None:
        self._bus = bus
        self._specs: dict[int, ModelSpec] = {}

    def model_of(self, servo_id: int) -> str | None:
        """The model name answering at ``servo_id`` (``"unknown (N)"``), or ``None``."""
        number = patient_ping(self._bus, servo_id)  # a busy host loses the odd ping
        if number is None:
            return None
        spec = model_by_number(self._bus.protocol, number)
        if spec is None:
            return f"unknown ({number})"
        self._specs[servo_id] = spec
        return spec.name

    def _spec(self, servo_id: int) -> ModelSpec:
        if servo_id not in self._specs and self.model_of(servo_id) is None:
            raise CalibrationWriteError(f"servo {servo_id} does not answer")
        if servo_id not in self._specs:
            raise CalibrationWriteError(f"servo {servo_id} is a model hilbot does not know")
        return self._specs[servo_id]

    def geometry(self, servo_id: int) -> Geometry:
        """Ticks per turn, center tick and tick range of the servo's model."""
        spec = self._spec(servo_id)
        return Geometry(spec.ticks_per_rev, spec.center_tick, spec.position_min, spec.position_max)

    def _read(self, servo_id: int, name: RegisterName) -> int:
        reg = self._spec(servo_id).register(name)
        return reg.decode(self._bus.read(servo_id, reg.address, reg.size)[0])

    def _write(self, servo_id: int, name: RegisterName, value: int) -> None:
        reg = self._spec(servo_id).register(name)
        if not reg.min <= value <= reg.max:
            raise CalibrationWriteError(
                f"servo {servo_id}: {name.value} must be in {reg.min}..{reg.max}, got {value}"
            )
        self._bus.write(servo_id, reg.address, reg.encode(value))

    def present_ticks(self, servo_ids: Sequence[int]) -> dict[int, int]:
        """Present Position of each servo [ticks]."""
        return {i: self._read(i, N.PRESENT_POSITION) for i in servo_ids}

    def homing_offset(self, servo_id: int) -> int:
        """The Homing Offset register [ticks]; 0 on models without one."""
        if N.HOMING_OFFSET not in self._spec(servo_id).table:
            return 0
        return self._read(servo_id, N.HOMING_OFFSET)

    def set_torque(self, servo_id: int, enabled: bool) -> None:
        """Torque Enable := 1 or 0."""
        self._write(servo_id, N.TORQUE_ENABLE, 1 if enabled else 0)

    def write_calibration(self, servo_id: int, homing: int, lower: int, upper: int) -> None:
        """Torque off, write Homing Offset, Min and Max Position Limit, read them back."""
        table = self._spec(servo_id).table
        names = (N.HOMING_OFFSET, N.MIN_POSITION_LIMIT, N.MAX_POSITION_LIMIT)
        if not all(name in table for name in names):
            raise CalibrationWriteError(
                f"servo {servo_id}: {self._specs[servo_id].name} has no Homing Offset and "
                "position limits to write (Protocol 1.0): keep the calibration in the file"
            )
        self.set_torque(servo_id, False)
        for name, value in zip(names, (homing, lower, upper), strict=True):
            self._write(servo_id, name, value)
        for name, value in zip(names, (homing, lower, upper), strict=True):
            back = self._read(servo_id, name)
            if back != value:
                raise CalibrationWriteError(
                    f"servo {servo_id}: {name.value} reads {back} after writing {value}"
                )


@contextlib.contextmanager
def dynamixel_access(bus: BusSpec, *, margin_ms: float = 3.0) -> Iterator[DynamixelAccess]:
    """A :class:`DynamixelAccess` on ``bus``, the port closed on exit."""
    dxl = DynamixelBus(bus.port, bus.baudrate, bus.protocol, retries=1, margin_ms=margin_ms)
    dxl.open()
    try:
        yield DynamixelAccess(dxl)
    finally:
        dxl.close()
