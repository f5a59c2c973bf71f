"""Task errors shared by the solvers: position, full rotation and tool-axis errors.

All errors are expressed in the source frame, in the units of a geometric
Jacobian (linear [m], angular [rad]), so ``J dq = e`` moves towards the target.
Written with scalar math: at 3x3 sizes numpy's per-call overhead dominates.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hilbot.kinematics.ik.core.target import Target
from hilbot.kinematics.spatial import so3_log

Array = NDArray[np.float64]
_NEAR_PI = math.pi - 1e-4  # below this the antisymmetric part of R gives the axis robustly


def rotation_error(target: Array, current: Array) -> tuple[Array, float]:
    """Rotation vector ``log(target @ current^T)`` (source frame) and its angle [rad].

    Args:
        target: (3, 3) target rotation.
        current: (3, 3) current rotation (any (>=3, >=3) array; the top-left block is used).

    Returns:
        ``(rotvec (3,), angle)``.
    """
    m = target @ current[:3, :3].T
    (m00, m01, m02), (m10, m11, m12), (m20, m21, m22) = m.tolist()
    vx, vy, vz = m21 - m12, m02 - m20, m10 - m01
    s2 = math.sqrt(vx * vx + vy * vy + vz * vz)  # 2 sin(angle)
    angle = math.atan2(0.5 * s2, 0.5 * (m00 + m11 + m22 - 1.0))
    if angle < _NEAR_PI:
        scale = angle / s2 if s2 > 1e-12 else 0.5
        return np.array((vx * scale, vy * scale, vz * scale)), angle
    rotvec = so3_log(m)
    return rotvec, float(np.linalg.norm(rotvec))


def axis_error(axis: Array, current: Array) -> tuple[Array, float]:
    """Smallest rotation taking the current z-axis onto ``axis``, and its angle [rad].

    Args:
        axis: (3,) unit target direction.
        current: (3, 3) current rotation (the z-axis is its third column).

    Returns:
        ``(rotvec (3,), angle)``; the rotation vector is perpendicular to both axes.
    """
    zx, zy, zz = current[0, 2], current[1, 2], current[2, 2]
    ax, ay, az = axis.tolist()
    cx, cy, cz = zy * az - zz * ay, zz * ax - zx * az, zx * ay - zy * ax
    s = math.sqrt(cx * cx + cy * cy + cz * cz)
    angle = math.atan2(s, zx * ax + zy * ay + zz * az)
    if s > 1e-12:
        k = angle / s
        return np.array((cx * k, cy * k, cz * k)), angle
    if angle < 1.0:
        return np.zeros(3), angle
    # Opposite directions: half a turn about any axis perpendicular to z.
    px, py, pz = (0.0, zz, -zy) if abs(zx) < 0.9 else (-zz, 0.0, zx)
    n = math.pi / math.sqrt(px * px + py * py + pz * pz)
    return np.array((px * n, py * n, pz * n)), angle


def residuals(chain: Any, q: Array, target: Target) -> tuple[float, float | None]:
    """Position residual [m] and orientation residual [rad] (``None`` without one) at ``q``."""
    pose = chain.fk(q)
    d = np.array(target.point) - pose[:3, 3]
    residual = math.sqrt(float(d @ d))
    rotation, axis = target.rotation, target.axis
    if rotation is not None:
        return residual, rotation_error(rotation, pose)[1]
    if axis is not None:
        return residual, axis_error(axis, pose)[1]
    return residual, None
