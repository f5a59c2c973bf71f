"""LeRobot's calibration files, in and out (``hilbot calibrate --from-lerobot / --to-lerobot``).

LeRobot keeps one JSON file per arm (``~/.cache/huggingface/lerobot/calibration/robots/
<type>/<id>.json``): per motor name, ``id``, ``drive_mode``, ``homing_offset`` (written to
the servo's EEPROM), and ``range_min``/``range_max`` [ticks] as the servo reads them with
that Homing Offset. LeRobot sets the Homing Offset in its middle pose so that the pose
reads the half turn (``resolution // 2 - 1``: 2047 on a 4096-tick servo).

hilbot's calibration maps the same ticks to joint positions
(``joint = offset + direction * (ticks - center) * rad_per_tick / gear_ratio``). The
conversion takes LeRobot's middle pose as the config's ``calibration.middle_pose`` (the
URDF's zero pose unless the config says otherwise), so:

- import: ``offset = middle - direction * (half_turn - center) * rad_per_tick / gear``,
  the range is ``range_min``/``range_max`` in joint units, ``homing_offset`` is LeRobot's;
  the direction is the config's, reversed where LeRobot's ``drive_mode`` is 1 (a
  Dynamixel whose Drive Mode register reverses it);
- export: the Homing Offset that makes the middle pose read the half turn (from the one
  the calibration wrote, or the factory 0), the range in those ticks, and ``drive_mode``
  1 for a Feetech servo turned against the config's direction (LeRobot applies a
  Feetech's drive mode in software only; a Dynamixel's would reverse the servo, so it
  stays 0 and its re-import takes the config's direction).

The motor names are the config's joint names (the SO-101's and Koch's are LeRobot's).
An imported file is an ordinary hilbot calibration: ``hilbot run`` and ``hilbot lead``
check it against the first reading like any other, and refuse it when stale.
"""

from __future__ import annotations

import datetime
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from hilbot.driver.calibration.files import CalibrationFileError
from hilbot.hal.calibration import Calibration, JointCalibration

if TYPE_CHECKING:
    from hilbot.driver.runtime.config import RobotConfig

FIELDS = ("id", "drive_mode", "homing_offset", "range_min", "range_max")


class _Servo(NamedTuple):
    ticks_per_rev: int
    center: int
    homing_sign: int  # present = raw + homing_sign * homing (Dynamixel +1, Feetech -1)


def _servo(config: RobotConfig, joint: str) -> _Servo:
    from hilbot.hal.family import family

    servo = next(s for s in config.servos if s.joint == joint)
    spec = next(s for s in config.servo_specs() if s.joint == joint)
    fam = family(config.bus_named(servo.bus).family)
    m: Any = fam.model(spec.model)
    return _Servo(int(m.ticks_per_rev), int(m.center_tick), fam.homing_sign)


def _half_turn(servo: _Servo) -> int:
    return (servo.ticks_per_rev - 1) // 2  # LeRobot's set_half_turn_homings target


def read_file(path: Path) -> dict[str, dict[str, int]]:
    """LeRobot's calibration JSON, checked.

    Raises:
        CalibrationFileError: unreadable, not JSON, or a motor without its five integers.
    """
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise CalibrationFileError(f"cannot read {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise CalibrationFileError(f"{path} is not JSON: {exc}") from None
    if not isinstance(data, dict) or not data:
        raise CalibrationFileError(f"{path}: expected LeRobot's {{motor: calibration}} mapping")
    out = {}
    for motor, fields in data.items():
        if not isinstance(fields, dict) or any(
            not isinstance(fields.get(f), int) or isinstance(fields.get(f), bool) for f in FIELDS
        ):
            raise CalibrationFileError(
                f"{path}: motor {motor!r}: expected the integers {', '.join(FIELDS)}"
            )
        out[str(motor)] = {f: int(fields[f]) for f in FIELDS}
    return out


def from_lerobot(
    data: dict[str, dict[str, int]], config: RobotConfig, port: str, source: Path
) -> Calibration:
    """The hilbot calibration of ``config`` from LeRobot's ``data`` (see the module docstring).

    Raises:
        CalibrationFileError: a motor the config does not have, a joint missing, an id
            that differs from the config's, or a range outside the servo's ticks.
    """
    specs = {s.joint: s for s in config.servo_specs() if s.shadow_of is None}
    unknown = sorted(set(data) - set(specs))
    if unknown:
        raise CalibrationFileError(
            f"{source}: motors {', '.join(unknown)} are not joints of {config.name} "
            f"({', '.join(specs)})"
        )
    missing = [j for j in specs if j not in data]
    if missing:
        raise CalibrationFileError(f"{source}: no calibration of {', '.join(missing)}")
    joints = {}
    for name, spec in specs.items():
        motor = data[name]
        if motor["id"] != spec.id:
            raise CalibrationFileError(
                f"{source}: {name} is motor {motor['id']} there but servo {spec.id} in "
                f"{config.name}"
            )
        servo = _servo(config, name)
        if not 0 <= motor["range_min"] < motor["range_max"] < servo.ticks_per_rev:
            raise CalibrationFileError(
                f"{source}: {name}: range_min {motor['range_min']} .. range_max "
                f"{motor['range_max']} is not a range of 0..{servo.ticks_per_rev - 1} ticks"
            )
        direction = -spec.direction if motor["drive_mode"] else spec.direction
        per_tick = 2 * math.pi / servo.ticks_per_rev / spec.gear_ratio
        middle = config.calibration.middle_pose.get(name, 0.0)
        offset = middle - direction * (_half_turn(servo) - servo.center) * per_tick
        ends = [
            offset + direction * (t - servo.center) * per_tick
            for t in (motor["range_min"], motor["range_max"])
        ]
        joints[name] = JointCalibration(
            servo_id=spec.id,
            offset=offset,
            direction=direction,
            lower=min(ends),
            upper=max(ends),
            homing_offset=motor["homing_offset"],
        )
    created = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    return Calibration(config.name, port, joints, created)


def fit_urdf(calibration: Calibration, config: RobotConfig) -> tuple[Calibration, list[str]]:
    """``calibration`` with each range cut to its URDF range; says what was cut.

    LeRobot's ranges can reach past the URDF's (the SO-101's wrist roll turns a full
    turn); hilbot's limits are the narrower of the two.

    Raises:
        CalibrationFileError: a range that misses its URDF range entirely.
    """
    import dataclasses

    from hilbot.driver.calibration.checks import urdf_limits

    limits = urdf_limits(config)
    joints = dict(calibration.joints)
    notes = []
    for name, joint in calibration.joints.items():
        urdf = limits.get(name)
        if urdf is None or (joint.lower >= urdf.lower and joint.upper <= urdf.upper):
            continue
        lower, upper = max(joint.lower, urdf.lower), min(joint.upper, urdf.upper)
        if lower >= upper:
            raise CalibrationFileError(
                f"{name}: LeRobot's range {math.degrees(joint.lower):+.1f}°.."
                f"{math.degrees(joint.upper):+.1f}° misses its URDF range "
                f"{math.degrees(urdf.lower):+.1f}°..{math.degrees(urdf.upper):+.1f}° "
                "(is the file this arm's, and its middle pose the config's?)"
            )
        joints[name] = dataclasses.replace(joint, lower=lower, upper=upper)
        notes.append(
            f"{name}: range cut to the URDF's {math.degrees(lower):+.1f}°.."
            f"{math.degrees(upper):+.1f}°"
        )
    return dataclasses.replace(calibration, joints=joints), notes


def to_lerobot(calibration: Calibration, config: RobotConfig) -> dict[str, dict[str, int]]:
    """LeRobot's calibration of the arm ``calibration`` describes (module docstring)."""
    specs = {s.joint: s for s in config.servo_specs() if s.shadow_of is None}
    out = {}
    for name, joint in calibration.joints.items():
        spec = specs.get(name)
        if spec is None:
            raise CalibrationFileError(f"the calibration's joint {name} is not in {config.name}")
        servo = _servo(config, name)
        per_tick = 2 * math.pi / servo.ticks_per_rev / spec.gear_ratio

        middle = config.calibration.middle_pose.get(name, 0.0)
        shift = _half_turn(servo) - round(
            _ticks(middle, joint, servo, per_tick)
        )  # the middle pose reads the half turn
        homing = (joint.homing_offset or 0) + servo.homing_sign * shift
        ends = sorted(round(_ticks(q, joint, servo, per_tick)) + shift for q in joint.range)
        last = servo.ticks_per_rev - 1
        # Feetech: LeRobot's drive_mode only reverses its normalised value (the servo is
        # not told), so it can say a servo turned around; a Dynamixel's Drive Mode
        # register would reverse the servo itself, so it stays 0 there
        reversed_here = servo.homing_sign < 0 and joint.direction != spec.direction
        out[name] = {
            "id": joint.servo_id,
            "drive_mode": 1 if reversed_here else 0,
            "homing_offset": homing,
            "range_min": min(max(ends[0], 0), last),
            "range_max": min(max(ends[1], 0), last),
        }
    return out


def _ticks(q: float, joint: JointCalibration, servo: _Servo, per_tick: float) -> float:
    """The ticks the servo reads at joint position ``q`` under ``joint``'s calibration."""
    return servo.center + (q - joint.offset) / (joint.direction * per_tick)


def write_file(data: dict[str, dict[str, int]], path: Path) -> Path:
    """Write LeRobot's calibration JSON (folders created); returns ``path``."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=4) + "\n")
    except OSError as exc:
        raise CalibrationFileError(f"cannot write {path}: {exc.strerror}") from None
    return path
