"""hilbot joints as LeRobot's robot classes name and scale them.

LeRobot's arm classes name each motor's feature ``<motor>.pos`` and normalise it from the
servo's ticks with its calibration (``range_min``/``range_max`` [ticks]):

- ``degrees``: ``(ticks - mid) * 360 / (resolution - 1)``, ``mid`` the middle of the range
  (the SO-101's body joints: LeRobot's SO follower and leader have ``use_degrees=True``);
- ``range_m100_100``: the range mapped to -100..100 (the Koch's body joints);
- ``range_0_100``: the range mapped to 0..100 (every gripper).

hilbot's joints are in rad (or m), and its calibration holds the same range in the joint
frame (``lower``/``upper``) with the servo's ``direction``; ticks are linear in the joint,
so these formulas give the same numbers from the joint value. A LeRobot calibration
imported with ``hilbot calibrate --from-lerobot`` gives exactly LeRobot's values; without a
calibration (the sim backend) the config's joint limits stand in for the range.

Robots LeRobot has no class for keep hilbot's units (rad or m) under ``<joint>.pos``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hilbot.driver.runtime.config import RobotConfig
    from hilbot.hal.calibration import Calibration

DEGREES = "degrees"
RANGE_M100_100 = "range_m100_100"
RANGE_0_100 = "range_0_100"
#: hilbot's own units (rad or m), for robots LeRobot has no class for.
SI = "si"

#: Encoder resolution of the servos of LeRobot's arms (STS3215, XL330, XL430) [ticks/turn].
RESOLUTION = 4096

BODY = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll")


@dataclass(frozen=True, slots=True)
class LeRobotArm:
    """A LeRobot robot class a hilbot config corresponds to."""

    robot_type: str  # LeRobot's ``robot_type`` (``Robot.name``)
    body: str  # the body joints' norm mode (the class's default ``use_degrees``)


#: hilbot config name -> LeRobot's class; the joint names are LeRobot's motor names.
LEROBOT_ARMS: dict[str, LeRobotArm] = {
    # LeRobot 0.4's SO-101 classes are SOFollower / SOLeader, named so_follower / so_leader
    "so101_follower": LeRobotArm("so_follower", DEGREES),
    "so101_leader": LeRobotArm("so_leader", DEGREES),
    "koch_v1_1_follower": LeRobotArm("koch_follower", RANGE_M100_100),
    "koch_v1_1_leader": LeRobotArm("koch_leader", RANGE_M100_100),
}


@dataclass(frozen=True, slots=True)
class JointUnit:
    """One joint's conversion from hilbot's value [rad or m] to the dataset's."""

    joint: str
    mode: str
    lower: float
    upper: float
    direction: int = 1
    gear_ratio: float = 1.0
    #: the direction of the range modes: LeRobot reverses a Feetech servo's normalised
    #: value by its drive_mode (a servo turned against the config), so there it is the
    #: config's direction; the calibrated one elsewhere
    range_direction: int | None = None

    def convert(self, value: float) -> float:
        """``value`` [rad or m] in the dataset's unit."""
        if self.mode == SI:
            return value
        if self.mode == DEGREES:
            mid = 0.5 * (self.lower + self.upper)
            ticks = self.direction * self.gear_ratio * (value - mid) * RESOLUTION / (2 * math.pi)
            return ticks * 360.0 / (RESOLUTION - 1)
        span = self.upper - self.lower
        sign = self.direction if self.range_direction is None else self.range_direction
        lo, hi = (self.lower, self.upper) if sign > 0 else (self.upper, self.lower)
        share = min(1.0, max(0.0, (value - lo) / (hi - lo))) if span > 0 else 0.0
        if self.mode == RANGE_0_100:
            return 100.0 * share
        return 200.0 * share - 100.0


@dataclass(frozen=True, slots=True)
class DatasetFeatures:
    """The dataset's joint features: names (``<joint>.pos``), units, LeRobot's robot type."""

    robot_type: str
    units: tuple[JointUnit, ...]

    @property
    def names(self) -> list[str]:
        """``<joint>.pos`` in order."""
        return [f"{u.joint}.pos" for u in self.units]

    @property
    def joints(self) -> list[str]:
        """The joint names in hilbot, in order."""
        return [u.joint for u in self.units]

    def vector(self, values: Mapping[str, float]) -> list[float]:
        """``values`` (hilbot joint -> rad or m) in the dataset's order and units."""
        return [u.convert(float(values[u.joint])) for u in self.units]


def features_for(
    config: RobotConfig,
    calibration: Calibration | None,
    joints: Sequence[str] | None = None,
    uncalibrated: RobotConfig | None = None,
) -> DatasetFeatures:
    """The features of ``config``'s ``joints`` (default: every servo-driven joint).

    ``config`` is calibrated (its servos' directions are the measured ones);
    ``uncalibrated`` is the config as written (default ``config``).
    """
    written = {s.joint: s.direction for s in (uncalibrated or config).servo_specs()}
    from hilbot.hal.family import family

    feetech = {  # LeRobot reverses these by drive mode: their range keeps the written direction
        s.joint
        for s in config.servos
        if family(config.bus_named(s.bus).family).lerobot_written_direction
    }
    specs = [s for s in config.servo_specs() if s.shadow_of is None]
    if joints is not None:
        wanted = set(joints)
        specs = [s for s in specs if s.joint in wanted]
    arm = LEROBOT_ARMS.get(config.name)
    limits = _limits(config)
    units = []
    for spec in specs:
        if arm is None:
            mode = SI
        elif spec.joint == "gripper":
            mode = RANGE_0_100
        else:
            mode = arm.body
        cal = calibration.joints.get(spec.joint) if calibration is not None else None
        lower, upper = cal.range if cal is not None else limits.get(spec.joint, (-1.0, 1.0))
        ranged = written.get(spec.joint) if spec.joint in feetech else None
        units.append(
            JointUnit(spec.joint, mode, lower, upper, spec.direction, spec.gear_ratio, ranged)
        )
    return DatasetFeatures(arm.robot_type if arm is not None else config.name, tuple(units))


def _limits(config: RobotConfig) -> dict[str, tuple[float, float]]:
    """The URDF's finite joint limits of ``config``."""
    from hilbot.driver.runtime.validation import load_robot

    robot = load_robot(config.urdf)
    out = {}
    for name in config.joint_names:
        lower, upper = robot.limits(name)
        if math.isfinite(lower) and math.isfinite(upper):
            out[name] = (float(lower), float(upper))
    return out
