"""``ServoAccess`` on a Feetech bus (STS/SCS): present ticks, "Ofs" homing offset, angle limits."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping

from hilbot.driver.calibration.access import RegisterAccess
from hilbot.hal.calibration import Geometry
from hilbot.hal.errors import HalError
from hilbot.hal.feetech.bus import FeetechBus
from hilbot.hal.feetech.tables import FeetechModel, FeetechRegister, models_with_number

N = FeetechRegister
#: Address of Model Number (Feetech memory tables: "Servo Major/Minor Version", 3-4).
MODEL_NUMBER_ADDRESS = 3
#: Pings tried before a servo counts as missing.
PING_ATTEMPTS = 5


class FeetechCalibrationError(HalError):
    """Writing a Feetech servo's calibration failed or did not take."""


class FeetechAccess(RegisterAccess[FeetechBus, FeetechModel, FeetechRegister]):
    """Calibration's view of one Feetech bus.

    Args:
        bus: an open :class:`FeetechBus`.
        configured: ``{id: model name}`` of the config, to pick among models that share a
            Model Number (the STS3215 variants).
    """

    homing_sign = -1  # Feetech: Present Position = actual position - Ofs (Homing Offset)
    _error = FeetechCalibrationError
    _present_position = N.PRESENT_POSITION
    _homing_offset = N.HOMING_OFFSET
    _torque_enable = N.TORQUE_ENABLE

    def __init__(self, bus: FeetechBus, configured: Mapping[int, str]) -> None:
        super().__init__(bus)
        self._configured = {i: name.upper() for i, name in configured.items()}

    def _number(self, servo_id: int) -> int:
        # Read before the byte order is known: both orders against the known numbers.
        data, _ = self._bus.read(servo_id, MODEL_NUMBER_ADDRESS, 2)
        little = int.from_bytes(data, "little")
        return little if models_with_number(little) else int.from_bytes(data, "big")

    def model_of(self, servo_id: int) -> str | None:
        """``"A/B"`` for the models its Model Number may be, ``None`` when nothing answers."""
        if all(self._bus.try_ping(servo_id) is None for _ in range(PING_ATTEMPTS)):
            return None  # a busy host loses the odd ping: several, then it is missing
        number = self._number(servo_id)
        known = models_with_number(number)
        if not known:
            return f"unknown ({number})"
        wanted = self._configured.get(servo_id)
        self._specs[servo_id] = next((m for m in known if m.name.upper() == wanted), known[0])
        return "/".join(m.name for m in known)

    def geometry(self, servo_id: int) -> Geometry:
        """Steps per turn, the center step and the step range."""
        spec = self._spec(servo_id)
        return Geometry(spec.ticks_per_rev, spec.center_tick, 0, spec.position_max)

    def write_calibration(self, servo_id: int, homing: int, lower: int, upper: int) -> None:
        """Torque off, unlock the EEPROM, write Ofs and the angle limits, lock, read back."""
        spec = self._spec(servo_id)
        names = (N.HOMING_OFFSET, N.MIN_ANGLE_LIMIT, N.MAX_ANGLE_LIMIT)
        if not all(name in spec.table for name in names):
            raise FeetechCalibrationError(
                f"servo {servo_id}: {spec.name} has no Ofs to write: keep the calibration "
                "in the file"
            )
        self.set_torque(servo_id, False)
        lock = spec.lock_register
        self._bus.write(servo_id, lock.address, lock.encode(0))
        try:
            self._write_all(servo_id, names, (homing, lower, upper))
        finally:
            self._bus.write(servo_id, lock.address, lock.encode(1))
        self._check_back(servo_id, names, (homing, lower, upper))


@contextlib.contextmanager
def feetech_access(
    port: str, baudrate: int, configured: Mapping[int, str], *, margin_ms: float = 3.0
) -> Iterator[FeetechAccess]:
    """A :class:`FeetechAccess` on ``port``, closed on exit."""
    bus = FeetechBus(port, baudrate, retries=1, margin_ms=margin_ms)
    bus.open()
    try:
        yield FeetechAccess(bus, configured)
    finally:
        bus.close()
