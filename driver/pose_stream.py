"""Pose targets as vectors, so a stream of them can be interpolated like joint targets.

A validated pose target (see :func:`hilbot.driver.targets.normalize_pose_target`) is
flattened into a vector and a *form*; vectors of one form interpolate component-wise and
:func:`rebuild_pose` turns the result back into a valid target of that form (unit axes and
quaternions, orthonormal rotations). Between two samples a few milliseconds apart the
component-wise path is the slerp to within far less than the solvers' tolerance.
"""

from __future__ import annotations

import enum
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hilbot.driver.targets import robust_norm


class PoseForm(enum.Enum):
    """The shape of a pose target."""

    POSITION = "position"  # (3,)
    POSITION_ONLY = "position, None"  # (position, None)
    AXIS = "axis"  # (position, tool axis (3,))
    QUATERNION = "quaternion"  # (position, (w, x, y, z))
    ROTATION = "rotation"  # (position, 3 x 3)
    TRANSFORM = "transform"  # 4 x 4


def flatten_pose(
    target: Any, previous: NDArray[np.float64] | None = None
) -> tuple[PoseForm, NDArray[np.float64]]:
    """``(form, vector)`` of a validated pose target.

    ``previous``: the last vector of the same form; a quaternion is flipped to its
    hemisphere (q and -q are one rotation), so the path between them is the short one.
    """
    if isinstance(target, tuple):
        position = np.asarray(target[0], dtype=np.float64)
        orientation = target[1]
        if orientation is None:
            return PoseForm.POSITION_ONLY, position.copy()
        o = np.asarray(orientation, dtype=np.float64)
        if o.shape == (3,):
            return PoseForm.AXIS, np.concatenate([position, o])
        if o.shape == (4,):
            if previous is not None and previous.shape == (7,) and np.dot(previous[3:], o) < 0:
                o = -o
            return PoseForm.QUATERNION, np.concatenate([position, o])
        return PoseForm.ROTATION, np.concatenate([position, o.reshape(9)])
    array = np.asarray(target, dtype=np.float64)
    if array.shape == (4, 4):
        return PoseForm.TRANSFORM, np.concatenate([array[:3, 3], array[:3, :3].reshape(9)])
    return PoseForm.POSITION, array.copy()


def _orthonormal(matrix: NDArray[np.float64]) -> NDArray[np.float64]:
    u, _, vt = np.linalg.svd(matrix)
    rotation: NDArray[np.float64] = u @ vt
    if np.linalg.det(rotation) < 0:
        u[:, -1] = -u[:, -1]
        rotation = u @ vt
    return rotation


def rebuild_pose(form: PoseForm, vector: NDArray[np.float64]) -> Any:
    """The pose target of ``form`` that ``vector`` (an interpolated one) stands for."""
    position = vector[:3].copy()
    if form is PoseForm.POSITION:
        return position
    if form is PoseForm.POSITION_ONLY:
        return (position, None)
    if form in (PoseForm.AXIS, PoseForm.QUATERNION):
        direction = vector[3:]
        return (position, direction / robust_norm(direction))
    rotation = _orthonormal(vector[3:12].reshape(3, 3))
    if form is PoseForm.ROTATION:
        return (position, rotation)
    transform = np.eye(4)
    transform[:3, :3] = rotation
    transform[:3, 3] = position
    return transform
