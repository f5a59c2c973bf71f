"""Calibration data: what ``hilbot calibrate`` measured, and the seam it measures through.

A calibration holds, per joint, the ``ServoSpec`` mapping that matches the arm as it
was assembled (``offset`` [rad or m] at the servo's center tick, ``direction``), the
range each joint was seen to move through (in the calibrated joint frame), and the
Homing Offset written to the servo, if one was::

    joint = offset + direction * (ticks - center_ticks) * radians_per_tick / gear_ratio

``apply`` gives the servo specs a backend is built from, so everything above the HAL
keeps speaking joint names and SI units.

``ServoAccess`` is what the calibration flow needs of a servo family, named by what it
means (present ticks, homing offset, position limits) rather than by a family's
register names or addresses: the Dynamixel and Feetech buses each implement it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from hilbot.hal.errors import HalError
from hilbot.hal.mapping import ServoSpec

#: Version of the calibration file format.
FORMAT_VERSION = 1


class CalibrationDataError(HalError, ValueError):
    """A calibration (or its file's data) is malformed: names the field and the problem."""


@dataclass(frozen=True, slots=True)
class JointCalibration:
    """One joint's calibration.

    Args:
        servo_id: the servo that drives the joint.
        offset: joint position at the servo's center tick [rad or m] (``ServoSpec.offset``).
        direction: +1, or -1 when the servo turns against the joint axis.
        lower: lowest position seen while the joint was moved through its range.
        upper: highest position seen.
        homing_offset: the Homing Offset written to the servo [ticks], or ``None`` when
            only the file holds the calibration.
    """

    servo_id: int
    offset: float
    direction: int
    lower: float
    upper: float
    homing_offset: int | None = None

    def __post_init__(self) -> None:
        if self.direction not in (1, -1):
            raise CalibrationDataError(f"direction must be 1 or -1, got {self.direction!r}")
        for name in ("offset", "lower", "upper"):
            if not math.isfinite(getattr(self, name)):
                raise CalibrationDataError(f"{name} must be finite, got {getattr(self, name)!r}")
        if not self.lower <= self.upper:
            raise CalibrationDataError(f"range lower {self.lower} is above upper {self.upper}")

    @property
    def range(self) -> tuple[float, float]:
        """``(lower, upper)`` [rad or m]."""
        return self.lower, self.upper


@dataclass(frozen=True, slots=True)
class Calibration:
    """A robot's calibration: per joint mapping and measured range.

    Args:
        robot: the config's name.
        port: the bus (port or serial number) it was measured on.
        joints: ``{joint: JointCalibration}``.
        created: when (ISO 8601, UTC).
    """

    robot: str
    port: str
    joints: Mapping[str, JointCalibration]
    created: str = ""

    def apply(self, servos: Sequence[ServoSpec]) -> tuple[ServoSpec, ...]:
        """``servos`` with each calibrated joint's offset and direction.

        Raises:
            CalibrationDataError: a joint's servo id differs from the calibrated one.
        """
        out = []
        for spec in servos:
            cal = self.joints.get(spec.joint)
            if cal is None or spec.shadow_of is not None:
                out.append(spec)
                continue
            if cal.servo_id != spec.id:
                raise CalibrationDataError(
                    f"{spec.joint}: calibrated on servo {cal.servo_id}, but the config drives "
                    f"it with servo {spec.id}; calibrate again"
                )
            out.append(dataclasses.replace(spec, offset=cal.offset, direction=cal.direction))
        return tuple(out)

    def to_data(self) -> dict[str, Any]:
        """Plain data for a YAML file."""
        return {
            "format": FORMAT_VERSION,
            "robot": self.robot,
            "port": self.port,
            "created": self.created,
            "joints": {
                name: {
                    "servo_id": j.servo_id,
                    "offset": round(j.offset, 6),
                    "direction": j.direction,
                    "range": [round(j.lower, 6), round(j.upper, 6)],
                    "homing_offset": j.homing_offset,
                }
                for name, j in self.joints.items()
            },
        }

    @classmethod
    def from_data(cls, data: Any) -> Calibration:
        """Validate the data of a calibration file.

        Raises:
            CalibrationDataError: naming the bad field.
        """
        if not isinstance(data, Mapping):
            raise CalibrationDataError("expected a mapping with robot, port and joints")
        if data.get("format") != FORMAT_VERSION:
            raise CalibrationDataError(
                f"format: expected {FORMAT_VERSION}, got {data.get('format')!r}"
            )
        joints = data.get("joints")
        if not isinstance(joints, Mapping) or not joints:
            raise CalibrationDataError("joints: expected a mapping of joint calibrations")
        return cls(
            robot=str(data.get("robot", "")),
            port=str(data.get("port", "")),
            joints={str(name): _joint(str(name), value) for name, value in joints.items()},
            created=str(data.get("created", "")),
        )


def _joint(name: str, value: Any) -> JointCalibration:
    try:
        lower, upper = value["range"]
        homing = value.get("homing_offset")
        return JointCalibration(
            servo_id=int(value["servo_id"]),
            offset=float(value["offset"]),
            direction=int(value["direction"]),
            lower=float(lower),
            upper=float(upper),
            homing_offset=None if homing is None else int(homing),
        )
    except CalibrationDataError as exc:
        raise CalibrationDataError(f"joints.{name}: {exc}") from None
    except (KeyError, TypeError, ValueError) as exc:
        raise CalibrationDataError(
            f"joints.{name}: expected servo_id, offset, direction, range [lower, upper] "
            f"and homing_offset ({type(exc).__name__}: {exc})"
        ) from None


@dataclass(frozen=True, slots=True)
class Geometry:
    """A servo model's encoder: ticks per output turn, the center tick, the tick range."""

    ticks_per_rev: float
    center: int
    min_tick: int
    max_tick: int

    @property
    def radians_per_tick(self) -> float:
        """[rad/tick]."""
        return 2.0 * math.pi / self.ticks_per_rev


class ServoAccess(Protocol):
    """What calibration does with a bus, whatever the servo family (blocking calls).

    ``homing_sign`` says how the family's Homing Offset enters the reading:
    present = raw + homing_sign * homing (Dynamixel +1; Feetech's "Ofs" subtracts, -1).
    """

    @property
    def homing_sign(self) -> int:
        """+1 or -1, see the class docstring."""
        ...

    def model_of(self, servo_id: int) -> str | None:
        """The model answering at ``servo_id``, or ``None`` when nothing answers."""
        ...

    def geometry(self, servo_id: int) -> Geometry:
        """The encoder geometry of the servo at ``servo_id``."""
        ...

    def present_ticks(self, servo_ids: Sequence[int]) -> dict[int, int]:
        """Present position of each servo [ticks, homing offset included]."""
        ...

    def homing_offset(self, servo_id: int) -> int:
        """The Homing Offset register [ticks]."""
        ...

    def set_torque(self, servo_id: int, enabled: bool) -> None:
        """Torque on or off (EEPROM writes need it off)."""
        ...

    def write_calibration(self, servo_id: int, homing: int, lower: int, upper: int) -> None:
        """Write Homing Offset and the position limits [ticks] to EEPROM and read them back.

        Raises:
            HalError: a value out of the register's range, or a read-back that differs.
        """
        ...
