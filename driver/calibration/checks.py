"""What a calibration measured, checked before it is written: against the URDF and the hand.

A measured range is what ``hilbot run`` and ``hilbot lead`` will use as the joint's
limits, so a wrong one must never be written silently:

- an end past the joint's URDF range means the offsets are wrong (the arm was not in
  its middle pose at step 1) or the URDF does not fit this arm: refused, unless
  ``--accept-ranges``;
- on ``--demo`` the hand's sweep is known: an end that is not where the hand took the
  joint (a reading missed on a busy host, a servo at the end of its travel) is refused;
- a joint moved through less than half its URDF range only narrows its limits, which
  is safe: a warning names it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import NamedTuple

from hilbot.driver.runtime.config import RobotConfig
from hilbot.hal.calibration import Calibration

#: How far past its URDF limit a measured end may reach [rad or m] (a few ticks' rounding
#: and a hand pushing against an end stop).
URDF_SLACK = 0.05
#: How far from where the demo's hand took a joint a measured end may be [rad or m].
SWEEP_SLACK = 0.05
#: A joint seen through less than this share of its URDF range gets a warning.
MIN_SHARE = 0.5


class Limits(NamedTuple):
    """A joint's URDF range, and whether it is prismatic (metres, not radians)."""

    lower: float
    upper: float
    prismatic: bool = False


class RangeProblem(NamedTuple):
    """One joint whose measured range does not fit: ``refuse`` it, or only warn."""

    joint: str
    text: str
    refuse: bool


def urdf_limits(config: RobotConfig) -> dict[str, Limits]:
    """The finite URDF limits of a config's joints, with their kind."""
    from hilbot.driver.runtime.validation import load_robot

    robot = load_robot(config.urdf)
    out = {}
    for joint in config.joint_names:
        urdf = robot.joints[joint]
        lower, upper = urdf.bounds()
        if math.isfinite(lower) and math.isfinite(upper):
            prismatic = getattr(urdf.type, "name", "") == "PRISMATIC"
            out[joint] = Limits(float(lower), float(upper), prismatic)
    return out


def span(lower: float, upper: float, prismatic: bool = False) -> str:
    """``lower..upper`` in the joint's units: degrees, or millimetres."""
    if prismatic:
        return f"{lower * 1e3:+.1f}..{upper * 1e3:+.1f} mm"
    return f"{math.degrees(lower):+.0f}..{math.degrees(upper):+.0f}°"


def range_problems(
    calibration: Calibration,
    limits: Mapping[str, Limits],
    swept: Mapping[str, tuple[float, float]] | None = None,
) -> list[RangeProblem]:
    """Every joint whose measured range does not fit its URDF range or the hand's sweep."""
    out = []
    for joint, cal in calibration.joints.items():
        urdf = limits.get(joint)
        prismatic = urdf is not None and urdf.prismatic
        seen = span(cal.lower, cal.upper, prismatic)
        if swept is not None and joint in swept:
            lo, hi = swept[joint]
            if abs(cal.lower - lo) > SWEEP_SLACK or abs(cal.upper - hi) > SWEEP_SLACK:
                text = f"{joint} measured {seen}, but the hand swept it {span(lo, hi, prismatic)}"
                out.append(RangeProblem(joint, text, refuse=True))
                continue
        if urdf is None:
            continue
        if cal.lower < urdf.lower - URDF_SLACK or cal.upper > urdf.upper + URDF_SLACK:
            text = (
                f"{joint} measured {seen}, past its URDF range "
                f"{span(urdf.lower, urdf.upper, prismatic)}"
            )
            out.append(RangeProblem(joint, text, refuse=True))
        elif cal.upper - cal.lower < MIN_SHARE * (urdf.upper - urdf.lower):
            share = (cal.upper - cal.lower) / (urdf.upper - urdf.lower)
            text = (
                f"{joint} moved through {seen}, {share:.0%} of its URDF range "
                f"{span(urdf.lower, urdf.upper, prismatic)}: its limits will be that narrow"
            )
            out.append(RangeProblem(joint, text, refuse=False))
    return out
