"""Pose targets as vectors, so a stream of them can be interpolated like joint targets.

A pose target, as the door parsed it (a ``hilbot.kinematics.ik.Target``, see
:func:`hilbot.driver.targets.parse_pose_target`), is flattened into a vector and a
*form*; vectors of one form interpolate component-wise and :func:`rebuild_pose` turns
the result back into a ``Target`` of that form (a unit tool axis, a proper rotation),
which the solvers use as given. A rotation travels as a unit quaternion: between two
samples a few milliseconds apart the component-wise path is the slerp to within far
less than the solvers' tolerance, and it stays well defined across any turn.
"""

from __future__ import annotations

import enum
import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hilbot.kinematics.spatial import matrix_to_quat
from hilbot.kinematics.tolerances import MIN_DIRECTION_NORM


class PoseForm(enum.Enum):
    """What a pose target asks for, and so the layout of its vector."""

    POSITION = "position"  # (3,): the point
    AXIS = "axis"  # (6,): the point, the unit tool axis
    ROTATION = "rotation"  # (7,): the point, the unit quaternion (w, x, y, z)


def flatten_pose(
    target: Any, previous: NDArray[np.float64] | None = None
) -> tuple[PoseForm, NDArray[np.float64]]:
    """``(form, vector)`` of a parsed pose target (a ``Target``).

    ``previous``: the last vector of the same form; a quaternion is flipped to its
    hemisphere (q and -q are one rotation), so the path between them is the short one.
    """
    point = target.point
    kind = target.kind.value
    if kind == "none":
        return PoseForm.POSITION, np.array(point, dtype=np.float64)
    if kind == "axis":
        return PoseForm.AXIS, np.array((*point, *target.orientation), dtype=np.float64)
    quat = matrix_to_quat(np.array(target.orientation).reshape(3, 3))
    if previous is not None and previous.shape == (7,) and np.dot(previous[3:], quat) < 0:
        quat = -quat
    return PoseForm.ROTATION, np.concatenate([point, quat])


def rebuild_pose(form: PoseForm, vector: NDArray[np.float64]) -> Any:
    """The ``Target`` of ``form`` that ``vector`` (an interpolated one) stands for.

    A vector that is not finite, or a direction the interpolation shrank to (almost)
    nothing, stands for no target: it comes back as raw arrays, which the solver refuses
    (an IK failure: the chain holds) instead of being given a made-up pose.
    """
    from hilbot.kinematics.ik.core.target import OrientationKind, Target

    values = vector.tolist()
    point = (values[0], values[1], values[2])
    direction = values[3:]
    norm = math.hypot(*direction) if direction else 1.0
    if not (math.isfinite(math.fsum(values)) and norm >= MIN_DIRECTION_NORM):
        return (vector[:3].copy(), vector[3:].copy()) if direction else vector.copy()
    if form is PoseForm.POSITION:
        return Target(point)
    if form is PoseForm.AXIS:
        return Target(point, OrientationKind.AXIS, tuple(v / norm for v in direction))
    w, x, y, z = (v / norm for v in direction)
    rotation = (
        1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
        2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
        2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y),
    )  # fmt: skip
    return Target(point, OrientationKind.FULL, rotation)
