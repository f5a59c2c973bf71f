"""``ServoAccess`` on a Feetech bus (STS/SCS): present ticks, "Ofs" homing offset, angle limits."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence

from hilbot.hal.calibration import Geometry
from hilbot.hal.errors import HalError
from hilbot.hal.feetech.bus import FeetechBus
from hilbot.hal.feetech.register_names import FeetechRegister
from hilbot.hal.feetech.tables import FeetechModel, models_with_number

N = FeetechRegister
#: Address of Model Number (Feetech memory tables: "Servo Major/Minor Version", 3-4).
MODEL_NUMBER_ADDRESS = 3
#: Pings tried before a servo counts as missing.
PING_ATTEMPTS = 5


class FeetechCalibrationError(HalError):
    """Writing a Feetech servo's calibration failed or did not take."""


class FeetechAccess:
    """Calibration's view of one Feetech bus.

    Args:
        bus: an open :class:`FeetechBus`.
        configured: ``{id: model name}`` of the config, to pick among models that share a
            Model Number (the STS3215 variants).
    """

    homing_sign = -1  # Feetech: Present Position = actual position - Ofs (Homing Offset)

    def __init__(self, bus: FeetechBus, configured: Mapping[int, str]) -> None:
        self._bus = bus
        self._configured = {i: name.upper() for i, name in configured.items()}
        self._specs: dict[int, FeetechModel] = {}

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

    def _spec(self, servo_id: int) -> FeetechModel:
        if servo_id not in self._specs and self.model_of(servo_id) is None:
            raise FeetechCalibrationError(f"servo {servo_id} does not answer")
        if servo_id not in self._specs:
            raise FeetechCalibrationError(f"servo {servo_id} is a model hilbot does not know")
        return self._specs[servo_id]

    def geometry(self, servo_id: int) -> Geometry:
        """Steps per turn, the center step and the step range."""
        spec = self._spec(servo_id)
        return Geometry(spec.ticks_per_rev, spec.center_tick, 0, spec.position_max)

    def _read(self, servo_id: int, name: FeetechRegister) -> int:
        reg = self._spec(servo_id).register(name)
        return reg.decode(self._bus.read(servo_id, reg.address, reg.size)[0])

    def _write(self, servo_id: int, name: FeetechRegister, value: int) -> None:
        reg = self._spec(servo_id).register(name)
        if not reg.min <= value <= reg.max:
            raise FeetechCalibrationError(
                f"servo {servo_id}: {reg.label} must be in {reg.min}..{reg.max}, got {value}"
            )
        self._bus.write(servo_id, reg.address, reg.encode(value))

    def present_ticks(self, servo_ids: Sequence[int]) -> dict[int, int]:
        """Present Position of each servo [steps]."""
        return {i: self._read(i, N.PRESENT_POSITION) for i in servo_ids}

    def homing_offset(self, servo_id: int) -> int:
        """The Ofs register [steps]; 0 on models without one."""
        if N.HOMING_OFFSET not in self._spec(servo_id).table:
            return 0
        return self._read(servo_id, N.HOMING_OFFSET)

    def set_torque(self, servo_id: int, enabled: bool) -> None:
        """Torque Enable := 1 or 0."""
        self._write(servo_id, N.TORQUE_ENABLE, 1 if enabled else 0)

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
            for name, value in zip(names, (homing, lower, upper), strict=True):
                self._write(servo_id, name, value)
        finally:
            self._bus.write(servo_id, lock.address, lock.encode(1))
        for name, value in zip(names, (homing, lower, upper), strict=True):
            back = self._read(servo_id, name)
            if back != value:
                raise FeetechCalibrationError(
                    f"servo {servo_id}: {spec.register(name).label} reads {back} after "
                    f"writing {value}"
                )


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
