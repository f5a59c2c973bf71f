"""Pose targets in the recording: a position channel plus the orientation as it was given.

The runtime accepts a position (3,), ``(position, orientation)`` with orientation
``None``, a tool axis (3,), a quaternion (w, x, y, z) or a 3 x 3 rotation, or a
4 x 4 transform. A recording keeps the form, so a replay sends the same target.
"""

from __future__ import annotations

import enum
from typing import Any

import numpy as np
from numpy.typing import NDArray


class OrientationKind(enum.IntEnum):
    """How a pose target's orientation was given (channel ``ee_target_kind``)."""

    NONE = 0  # no target this cycle
    POSITION = 1  # position only
    AXIS = 2  # (position, tool axis (3,))
    QUATERNION = 3  # (position, quaternion (w, x, y, z))
    MATRIX = 4  # (position, 3 x 3 rotation)
    TRANSFORM = 5  # a 4 x 4 transform (rotation in ``ee_target_orientation``)


def split_pose_target(value: Any) -> tuple[NDArray[np.float64], OrientationKind, NDArray[Any]]:
    """Split a runtime pose target into position (3,), its orientation kind and values (9,).

    The runtime stores a parsed ``Target`` (a quaternion then comes as its rotation).
    """
    orientation = np.full(9, np.nan)
    kind = getattr(getattr(value, "kind", None), "value", None)
    if kind is not None:  # a hilbot.kinematics.ik.Target: its kind is "none", "axis" or "full"
        flat = np.array(value.orientation, dtype=np.float64)
        orientation[: flat.size] = flat
        parsed = {"none": OrientationKind.POSITION, "axis": OrientationKind.AXIS}
        return np.array(value.point), parsed.get(kind, OrientationKind.MATRIX), orientation
    if isinstance(value, tuple):
        position, rot = value
        if rot is None:
            return np.asarray(position), OrientationKind.POSITION, orientation
        flat = np.asarray(rot, dtype=np.float64).reshape(-1)
        orientation[: flat.size] = flat
        kind = {3: OrientationKind.AXIS, 4: OrientationKind.QUATERNION}.get(
            flat.size, OrientationKind.MATRIX
        )
        return np.asarray(position), kind, orientation
    array = np.asarray(value, dtype=np.float64)
    if array.shape == (4, 4):
        orientation[:] = array[:3, :3].reshape(-1)
        return array[:3, 3], OrientationKind.TRANSFORM, orientation
    return array.reshape(3), OrientationKind.POSITION, orientation


def join_pose_target(
    position: NDArray[np.float64], kind: OrientationKind, orientation: NDArray[np.float64]
) -> Any:
    """Inverse of :func:`split_pose_target`: the target in the form it was given."""
    match kind:
        case OrientationKind.POSITION:
            return position.copy()
        case OrientationKind.AXIS:
            return (position.copy(), orientation[:3].copy())
        case OrientationKind.QUATERNION:
            return (position.copy(), orientation[:4].copy())
        case OrientationKind.MATRIX:
            return (position.copy(), orientation.reshape(3, 3).copy())
        case OrientationKind.TRANSFORM:
            pose = np.eye(4)
            pose[:3, :3] = orientation.reshape(3, 3)
            pose[:3, 3] = position
            return pose
    raise ValueError(f"no pose target of kind {kind!r}")
