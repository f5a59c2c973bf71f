"""Demo motion patterns: end-effector offsets for a circle and a figure-eight (pure)."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from hilbot._compat import StrEnum


class Pattern(StrEnum):
    """What ``hilbot teleop`` publishes."""

    CIRCLE = "circle"
    FIGURE8 = "figure8"
    JOG = "jog"


class Plane(StrEnum):
    """The plane a pattern is drawn in, in the chain's source frame."""

    XY = "xy"
    YZ = "yz"
    XZ = "xz"


_AXES = {Plane.XY: (0, 1), Plane.YZ: (1, 2), Plane.XZ: (0, 2)}


def pattern_offset(
    pattern: Pattern, phase: float, radius: float, plane: Plane = Plane.YZ
) -> NDArray[np.float64]:
    """Offset (3,) [m] from the start point at ``phase`` [rad] along the pattern.

    Both curves pass through the start point at phase 0 (so the arm does not
    jump there) and are periodic in 2π.

    - circle: radius ``radius``, centred ``radius`` away from the start.
    - figure-eight: a lemniscate of Gerono, ``radius`` wide on each side.

    Raises:
        ValueError: for ``Pattern.JOG`` (it has no path) or a negative radius.
    """
    if radius < 0.0:
        raise ValueError(f"radius must be >= 0 m, got {radius}")
    if pattern is Pattern.CIRCLE:
        u, v = radius * (math.cos(phase) - 1.0), radius * math.sin(phase)
    elif pattern is Pattern.FIGURE8:
        u, v = radius * math.sin(phase), radius * math.sin(phase) * math.cos(phase)
    else:
        raise ValueError(f"the {pattern.value} pattern has no path; it follows the keyboard")
    offset = np.zeros(3)
    first, second = _AXES[plane]
    offset[first], offset[second] = u, v
    return offset


#: Keyboard jogging: key -> unit direction in the chain's source frame.
JOG_KEYS: dict[str, tuple[float, float, float]] = {
    "w": (1.0, 0.0, 0.0),
    "s": (-1.0, 0.0, 0.0),
    "a": (0.0, 1.0, 0.0),
    "d": (0.0, -1.0, 0.0),
    "r": (0.0, 0.0, 1.0),
    "f": (0.0, 0.0, -1.0),
}
#: Keyboard jogging: key -> command name.
#: The e-stop and reset keys are those of ``hilbot run``'s terminal (space or e e-stops,
#: c resets): one key never means two things.
JOG_COMMANDS: dict[str, str] = {
    "n": "enable",
    "x": "disable",
    " ": "estop",
    "e": "estop",
    "c": "reset",
    "h": "home",
}
JOG_HELP = (
    "jog: w/s ±x, a/d ±y, r/f ±z; n enable, x disable, space or e e-stop, c reset, h home, q quit"
)


def jog_step(key: str, step: float) -> NDArray[np.float64] | None:
    """Displacement (3,) [m] for a jog key, or None if the key does not jog."""
    direction = JOG_KEYS.get(key.lower())
    return None if direction is None else np.asarray(direction) * step
