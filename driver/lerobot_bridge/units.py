"""LeRobot's action and observation values <-> hilbot's joint values, both ways.

The forward way (joint [rad or m] -> LeRobot's ``<motor>.pos``) is the dataset's
(:mod:`hilbot.driver.dataset.features`); :func:`to_joint` is its inverse, bounded as
LeRobot bounds a goal it un-normalises (a range mode's value to its range).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from hilbot.driver.dataset.features import (
    DEGREES,
    RANGE_0_100,
    RESOLUTION,
    SI,
    DatasetFeatures,
    JointUnit,
)


def to_joint(unit: JointUnit, value: float) -> float:
    """``value`` in LeRobot's unit of ``unit`` -> the joint's [rad or m]."""
    if unit.mode == SI:
        return value
    if unit.mode == DEGREES:
        mid = 0.5 * (unit.lower + unit.upper)
        ticks = value * (RESOLUTION - 1) / 360.0
        return mid + ticks * 2 * math.pi / RESOLUTION / (unit.direction * unit.gear_ratio)
    if unit.mode == RANGE_0_100:
        share = min(100.0, max(0.0, value)) / 100.0
    else:
        share = (min(100.0, max(-100.0, value)) + 100.0) / 200.0
    sign = unit.direction if unit.range_direction is None else unit.range_direction
    lo, hi = (unit.lower, unit.upper) if sign > 0 else (unit.upper, unit.lower)
    return lo + share * (hi - lo)


@dataclass(frozen=True, slots=True)
class LeRobotUnits:
    """One arm's ``<motor>.pos`` features and their conversions."""

    features: DatasetFeatures

    @property
    def keys(self) -> list[str]:
        """``<joint>.pos`` in order."""
        return self.features.names

    def to_lerobot(self, joints: Mapping[str, float]) -> dict[str, float]:
        """Convert hilbot joint values to LeRobot's ``{"<joint>.pos": value}``."""
        return {
            f"{u.joint}.pos": float(u.convert(float(joints[u.joint]))) for u in self.features.units
        }

    def to_joints(self, action: Mapping[str, object]) -> dict[str, float]:
        """LeRobot's ``{"<joint>.pos": value}`` (every key present) -> hilbot joint values.

        Raises:
            ValueError: a key missing, or a value that is not a finite number.
        """
        out = {}
        for unit in self.features.units:
            key = f"{unit.joint}.pos"
            if key not in action:
                raise ValueError(f"the action has no {key!r} (expected {', '.join(self.keys)})")
            value = _number(key, action[key])
            out[unit.joint] = to_joint(unit, value)
        return out


def _number(key: str, value: object) -> float:
    try:
        number = float(value)  # type: ignore[arg-type]  # numpy and torch scalars too
    except (TypeError, ValueError):
        raise ValueError(f"{key}: {value!r} is not a number") from None
    if not math.isfinite(number):
        raise ValueError(f"{key}: {value!r} is not a finite number")
    return number
