"""Primitive link geometry for the view: a capsule-like segment per link, from the URDF.

The shipped URDFs have no meshes, so each link is drawn as cylinders from its origin to
its child joints' origins (a sphere on a leaf link), the same shapes the MuJoCo model
collides with (:mod:`hilbot.sim.mujoco_model`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from hilbot.kinematics import Robot

F64 = NDArray[np.float64]


class Segment(NamedTuple):
    """One cylinder of a link, in the link's frame [m]."""

    link: str
    start: F64  # (3,)
    end: F64  # (3,)


def link_segments(robot: Robot) -> list[Segment]:
    """The cylinders of every link: its origin to each child joint origin over 1 mm."""
    out = []
    for link in robot.links.values():
        for child in link.child_joints:
            end = np.array(robot.joints[child].origin[:3, 3], dtype=np.float64)
            if float(np.linalg.norm(end)) > 1e-3:
                out.append(Segment(link.name, np.zeros(3), end))
    return out


def link_radius(robot: Robot) -> float:
    """A drawing radius [m] scaled to the robot's size (15 % of its median link)."""
    lengths = [
        float(np.linalg.norm(j.origin[:3, 3]))
        for j in robot.joints.values()
        if float(np.linalg.norm(j.origin[:3, 3])) > 1e-3
    ]
    scale = float(np.median(lengths)) if lengths else 0.1
    return min(max(0.15 * scale, 0.006), 0.04)


def segment_pose(pose: F64, segment: Segment) -> tuple[F64, F64, float]:
    """World (wxyz, center, length) of a cylinder along z through ``segment``.

    Args:
        pose: (4, 4) pose of the segment's link in the root frame.
        segment: the segment.
    """
    a = pose[:3, :3] @ segment.start + pose[:3, 3]
    b = pose[:3, :3] @ segment.end + pose[:3, 3]
    axis = b - a
    length = float(np.linalg.norm(axis))
    return _z_to(axis / length if length > 0 else np.array([0.0, 0.0, 1.0])), (a + b) / 2, length


def _z_to(direction: F64) -> F64:
    """Quaternion (w, x, y, z) rotating +z onto the unit ``direction``."""
    z = np.array([0.0, 0.0, 1.0])
    cross = np.cross(z, direction)
    dot = float(np.dot(z, direction))
    if dot < -1.0 + 1e-9:
        return np.array([0.0, 1.0, 0.0, 0.0])
    q = np.array([1.0 + dot, *cross])
    norm: F64 = q / np.linalg.norm(q)
    return norm


def rotation_wxyz(rotation: F64) -> F64:
    """(w, x, y, z) of a rotation matrix."""
    m = rotation
    w = np.sqrt(max(0.0, 1.0 + m[0, 0] + m[1, 1] + m[2, 2])) / 2
    x = np.sqrt(max(0.0, 1.0 + m[0, 0] - m[1, 1] - m[2, 2])) / 2
    y = np.sqrt(max(0.0, 1.0 - m[0, 0] + m[1, 1] - m[2, 2])) / 2
    z = np.sqrt(max(0.0, 1.0 - m[0, 0] - m[1, 1] + m[2, 2])) / 2
    x = np.copysign(x, m[2, 1] - m[1, 2])
    y = np.copysign(y, m[0, 2] - m[2, 0])
    z = np.copysign(z, m[1, 0] - m[0, 1])
    return np.array([w, x, y, z])


def target_point(value: object) -> F64 | None:
    """The position (3,) of a pose target in any of its forms, or ``None``."""
    point = getattr(value, "point", None)  # a parsed hilbot.kinematics.ik.Target
    if isinstance(point, tuple):
        value = point
    if isinstance(value, tuple | list) and value:
        value = value[0]
    if isinstance(value, Mapping):
        value = value.get("position")
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        return None
    if array.shape == (3,):
        return array
    if array.shape == (4, 4):
        return np.array(array[:3, 3])
    return None
