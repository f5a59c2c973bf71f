"""``ServoAccess`` on a Dynamixel bus: what calibration reads and writes, by register name."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from hilbot.driver.calibration.access import RegisterAccess
from hilbot.hal.calibration import Geometry
from hilbot.hal.dynamixel.bus import DynamixelBus
from hilbot.hal.dynamixel.startup import patient_ping
from hilbot.hal.dynamixel.tables import ModelSpec, RegisterName, model_by_number
from hilbot.hal.errors import HalError
from hilbot.hal.mapping import BusSpec

N = RegisterName


class CalibrationWriteError(HalError):
    """Writing a servo's calibration failed or did not take: names the servo and register."""


class DynamixelAccess(RegisterAccess[DynamixelBus, ModelSpec, RegisterName]):
    """Calibration's view of one Dynamixel bus (Protocol 2.0 servos with a Homing Offset).

    Args:
        bus: an open :class:`DynamixelBus`.
    """

    homing_sign = 1  # e-manual: Present Position = actual position + Homing Offset
    _error = CalibrationWriteError
    _present_position = N.PRESENT_POSITION
    _homing_offset = N.HOMING_OFFSET
    _torque_enable = N.TORQUE_ENABLE

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

    def geometry(self, servo_id: int) -> Geometry:
        """Ticks per turn, center tick and tick range of the servo's model."""
        spec = self._spec(servo_id)
        return Geometry(spec.ticks_per_rev, spec.center_tick, spec.position_min, spec.position_max)

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
        self._write_all(servo_id, names, (homing, lower, upper))
        self._check_back(servo_id, names, (homing, lower, upper))


@contextlib.contextmanager
def dynamixel_access(bus: BusSpec, *, margin_ms: float = 3.0) -> Iterator[DynamixelAccess]:
    """A :class:`DynamixelAccess` on ``bus``, the port closed on exit."""
    dxl = DynamixelBus(bus.port, bus.baudrate, bus.protocol, retries=1, margin_ms=margin_ms)
    dxl.open()
    try:
        yield DynamixelAccess(dxl)
    finally:
        dxl.close()
