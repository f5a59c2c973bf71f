"""Links and joints of a robot model: types, limits, mimic, and the motion of each joint type."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from hilbot.kinematics import spatial

Array = NDArray[np.float64]


class JointType(enum.Enum):
    """URDF joint types."""

    REVOLUTE = "revolute"
    CONTINUOUS = "continuous"
    PRISMATIC = "prismatic"
    FIXED = "fixed"
    FLOATING = "floating"
    PLANAR = "planar"

    @property
    def dof(self) -> int:
        """Degrees of freedom of a joint of this type (before mimic)."""
        return _DOF[self]


_DOF = {
    JointType.REVOLUTE: 1,
    JointType.CONTINUOUS: 1,
    JointType.PRISMATIC: 1,
    JointType.FIXED: 0,
    JointType.FLOATING: 6,
    JointType.PLANAR: 3,
}

#: Joint types with one scalar coordinate (the only ones that can mimic or be mimicked).
SCALAR_TYPES = frozenset({JointType.REVOLUTE, JointType.CONTINUOUS, JointType.PRISMATIC})


class JointLimit(NamedTuple):
    """URDF ``<limit>``: position bounds [rad or m], velocity [rad/s or m/s], effort [N·m or N]."""

    lower: float
    upper: float
    velocity: float
    effort: float


class Mimic(NamedTuple):
    """URDF ``<mimic>``: this joint's value is ``multiplier * value(joint) + offset``."""

    joint: str
    multiplier: float = 1.0
    offset: float = 0.0


@dataclass(frozen=True, eq=False)
class Joint:
    """One URDF joint.

    Attributes:
        name: Joint name.
        type: Joint type.
        parent: Parent link name.
        child: Child link name.
        origin: (4, 4) pose of the joint frame in the parent link frame (at zero configuration
            this is the child link frame).
        axis: (3,) unit axis in the joint frame (rotation axis, translation direction, or the
            normal of a planar joint's plane). ``(1, 0, 0)`` when the URDF gives none.
        limit: The ``<limit>`` element, if any.
        mimic: The ``<mimic>`` element, if any.
    """

    name: str
    type: JointType
    parent: str
    child: str
    origin: Array = field(repr=False)
    axis: Array = field(repr=False)
    limit: JointLimit | None = None
    mimic: Mimic | None = None

    @property
    def dof(self) -> int:
        """Independent coordinates: 1 revolute/continuous/prismatic, 3 planar, 6 floating.

        A fixed joint and a mimic follower have none.
        """
        return 0 if self.mimic is not None else self.type.dof

    @property
    def is_movable(self) -> bool:
        """Whether the joint moves at all (a mimic follower moves, with its leader)."""
        return self.type is not JointType.FIXED

    def bounds(self) -> tuple[float, float]:
        """Position bounds ``(lower, upper)``; infinite for continuous, planar and floating."""
        if self.type in (JointType.REVOLUTE, JointType.PRISMATIC) and self.limit is not None:
            return self.limit.lower, self.limit.upper
        if self.type is JointType.FIXED:
            return 0.0, 0.0
        return -np.inf, np.inf

    def motion(self, q: float | Array) -> Array:
        """Return the (4, 4) child pose in the parent frame at configuration ``q``.

        ``q`` is a float (or a (1,) array) for scalar joints, ``(x, y, theta)`` for planar and
        ``(x, y, z, rx, ry, rz)`` (position, rotation vector) for floating joints.
        """
        return self.origin @ local_motion(self.type, self.axis, q)


def plane_basis(axis: Array) -> Array:
    """Rotation whose columns are the planar joint's in-plane directions ``u, v`` and ``axis``.

    It is the smallest rotation taking z onto ``axis``; for the usual ``axis = (0, 0, 1)``
    the planar coordinates ``(x, y)`` are along the joint frame's x and y.
    """
    return spatial.rotation_between(np.array([0.0, 0.0, 1.0]), axis)


def local_motion(kind: JointType, axis: Array, q: float | Array) -> Array:
    """The (4, 4) motion of a joint in its own frame (after ``origin``) at configuration ``q``."""
    t = np.eye(4)
    if kind in (JointType.REVOLUTE, JointType.CONTINUOUS):
        t[:3, :3] = spatial.so3_exp(axis * float(np.reshape(q, -1)[0]))
    elif kind is JointType.PRISMATIC:
        t[:3, 3] = axis * float(np.reshape(q, -1)[0])
    elif kind is JointType.PLANAR:
        x, y, theta = np.asarray(q, dtype=np.float64)
        basis = plane_basis(axis)
        t[:3, :3] = spatial.so3_exp(axis * theta)
        t[:3, 3] = basis[:, 0] * x + basis[:, 1] * y
    elif kind is JointType.FLOATING:
        c = np.asarray(q, dtype=np.float64)
        t[:3, :3] = spatial.so3_exp(c[3:])
        t[:3, 3] = c[:3]
    return t


@dataclass(frozen=True)
class Link:
    """One URDF link (geometry is not needed and not kept).

    Attributes:
        name: Link name.
        parent_joint: The joint whose child this link is; ``None`` for the root.
        child_joints: Joints whose parent this link is, in URDF order.
    """

    name: str
    parent_joint: str | None
    child_joints: tuple[str, ...] = ()


def coordinates(joint: Joint, value: object) -> Array:
    """Flat coordinates ``(type dof,)`` of a joint from a user value.

    Accepted values: a float for scalar joints; for a planar joint ``(x, y, theta)`` or a
    (4, 4) pose (projected onto the plane); for a floating joint ``(x, y, z, rx, ry, rz)``
    (position, rotation vector), ``(x, y, z, qw, qx, qy, qz)`` (position, quaternion) or a
    (4, 4) pose.

    Raises:
        ValueError: The value has the wrong shape for the joint, naming the joint.
    """
    a = np.asarray(value, dtype=np.float64)
    kind = joint.type
    n = kind.dof
    if a.shape == (n,) or (n == 1 and a.shape == ()):
        return a.reshape(n)
    if kind is JointType.FLOATING and a.shape == (7,):
        return np.concatenate([a[:3], spatial.quat_to_rotvec(a[3:])])
    if kind in (JointType.FLOATING, JointType.PLANAR) and a.shape == (4, 4):
        if kind is JointType.FLOATING:
            return np.concatenate([a[:3, 3], spatial.so3_log(a[:3, :3])])
        basis = plane_basis(joint.axis)
        local = basis.T @ a[:3, :3] @ basis  # rotation about the plane normal = local z
        return np.array(
            [basis[:, 0] @ a[:3, 3], basis[:, 1] @ a[:3, 3], np.arctan2(local[1, 0], local[0, 0])]
        )
    forms = {
        JointType.FLOATING: "(6,) position + rotation vector, (7,) position + quaternion "
        "(w, x, y, z) or a (4, 4) pose",
        JointType.PLANAR: "(3,) (x, y, theta) or a (4, 4) pose",
    }.get(kind, "a float")
    raise ValueError(
        f"joint {joint.name!r} ({kind.value}) takes {forms}, got an array of shape {a.shape}"
    )
