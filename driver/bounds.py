"""Sane ranges of the numbers in a robot config, and the soft-limit margin rule.

Every number in a config must be finite (``.inf`` and ``.nan`` are refused at load with
the field path, see :mod:`hilbot.driver.config`); these constants bound the rest. The
safety layer applies the margin rule too, so a config built in Python cannot skip it.
"""

from __future__ import annotations

MAX_DELTA_PER_CYCLE = 0.5  # [rad or m] beyond this one cycle is a jump, not a step
MAX_JOINT_VELOCITY = 50.0  # [rad/s or m/s] a per-joint velocity limit (XL330-M077: ~40 rad/s)
MAX_JOINT_ACCELERATION = 5000.0  # [rad/s² or m/s²] a per-joint acceleration limit
MAX_JOINT_JERK = 1e6  # [rad/s³ or m/s³] a per-joint jerk limit
MAX_WATCHDOG_TIMEOUT = 60.0  # [s]
MIN_RATE_HZ = 1.0  # [Hz]
MAX_RATE_HZ = 2000.0  # [Hz] the loop's timing and stats are not made for more
#: A ``soft_limit_margin`` must leave every limited joint at least this fraction of its URDF
#: range; a margin that leaves less is an error naming the joint (it is never skipped).
MIN_RANGE_FRACTION = 0.1


def margin_problem(joint: str, lower: float, upper: float, margin: float) -> str | None:
    """Why ``margin`` cannot shrink ``joint``'s limits ``[lower, upper]``, or None if it can."""
    span = upper - lower
    left = span - 2.0 * margin
    if left >= MIN_RANGE_FRACTION * span * (1.0 - 1e-9):  # rounding of the bound itself
        return None
    most = (1.0 - MIN_RANGE_FRACTION) * span / 2.0
    return (
        f"a margin of {margin:g} leaves joint {joint!r} {max(left, 0.0):.4f} of its range "
        f"[{lower:.4f}, {upper:.4f}]; it must leave at least {MIN_RANGE_FRACTION:.0%} "
        f"(a margin of at most {most:.4f} for this joint), or narrow single joints with "
        "safety.soft_limits instead"
    )
