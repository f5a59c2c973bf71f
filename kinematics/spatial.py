"""Spatial math: rotations, quaternions, roll-pitch-yaw, axis-angle, SO(3)/SE(3) exp and log.

Conventions:
    - Quaternions are ``(w, x, y, z)``, unit norm; ``q`` and ``-q`` are the same rotation.
    - Roll-pitch-yaw follows URDF: ``R = Rz(yaw) @ Ry(pitch) @ Rx(roll)`` (fixed axes x, y, z).
    - A rotation vector is ``angle * unit_axis`` (the SO(3) logarithm), angle in [0, pi].
    - Twists and SE(3) tangent vectors are ``(v, w)``: linear part first, like the Jacobians.
    - Transforms are 4 x 4 homogeneous matrices ``[[R, p], [0, 0, 0, 1]]``.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from numpy.typing import NDArray

Array = NDArray[np.float64]

#: Below this angle [rad] the exp/log maps use Taylor series instead of their closed forms.
_SMALL = 1e-6


def _vec3(v: npt.ArrayLike, what: str) -> Array:
    a = np.asarray(v, dtype=np.float64)
    if a.shape != (3,):
        raise ValueError(f"{what} must have shape (3,), got {a.shape}")
    return a


def _mat(m: npt.ArrayLike, shape: tuple[int, int], what: str) -> Array:
    a = np.asarray(m, dtype=np.float64)
    if a.shape != shape:
        raise ValueError(f"{what} must have shape {shape}, got {a.shape}")
    return a


# --- building blocks -------------------------------------------------------------------------


def skew(v: npt.ArrayLike) -> Array:
    """Return the 3 x 3 matrix ``K`` with ``K @ u == cross(v, u)``."""
    x, y, z = _vec3(v, "v")
    return np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])


def unskew(k: npt.ArrayLike) -> Array:
    """Return ``v`` from a skew-symmetric ``K`` (the antisymmetric part is used)."""
    m = _mat(k, (3, 3), "K")
    return 0.5 * np.array([m[2, 1] - m[1, 2], m[0, 2] - m[2, 0], m[1, 0] - m[0, 1]])


def transform(
    rotation: npt.ArrayLike | None = None, position: npt.ArrayLike | None = None
) -> Array:
    """Return the 4 x 4 transform with the given rotation (3 x 3) and position (3,)."""
    t = np.eye(4)
    if rotation is not None:
        t[:3, :3] = _mat(rotation, (3, 3), "rotation")
    if position is not None:
        t[:3, 3] = _vec3(position, "position")
    return t


def inverse_transform(t: npt.ArrayLike) -> Array:
    """Return the inverse of a rigid 4 x 4 transform (using ``R^T``, not a matrix inverse)."""
    m = _mat(t, (4, 4), "transform")
    out = np.eye(4)
    rt = m[:3, :3].T
    out[:3, :3] = rt
    out[:3, 3] = -rt @ m[:3, 3]
    return out


def is_rotation(r: npt.ArrayLike, tol: float = 1e-9) -> bool:
    """Return whether ``r`` is a 3 x 3 proper rotation (orthonormal, determinant +1)."""
    m = np.asarray(r, dtype=np.float64)
    if m.shape != (3, 3):
        return False
    return bool(np.allclose(m.T @ m, np.eye(3), atol=tol) and np.linalg.det(m) > 0.0)


# --- elementary rotations, rpy ----------------------------------------------------------------


def rot_x(angle: float) -> Array:
    """Rotation by ``angle`` [rad] about x."""
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])


def rot_y(angle: float) -> Array:
    """Rotation by ``angle`` [rad] about y."""
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])


def rot_z(angle: float) -> Array:
    """Rotation by ``angle`` [rad] about z."""
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def rpy_to_matrix(rpy: npt.ArrayLike) -> Array:
    """Rotation matrix of URDF roll-pitch-yaw ``(r, p, y)``: ``Rz(y) @ Ry(p) @ Rx(r)``."""
    r, p, y = _vec3(rpy, "rpy")
    cr, sr = math.cos(r), math.sin(r)
    cp, sp = math.cos(p), math.sin(p)
    cy, sy = math.cos(y), math.sin(y)
    return np.array(
        [
            [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
            [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
            [-sp, cp * sr, cp * cr],
        ]
    )


def matrix_to_rpy(r: npt.ArrayLike) -> Array:
    """Roll-pitch-yaw ``(r, p, y)`` of a rotation, pitch in [-pi/2, pi/2].

    At gimbal lock (pitch = ±pi/2) roll and yaw are not unique: roll is set to 0.
    """
    m = _mat(r, (3, 3), "rotation")
    sp = -m[2, 0]
    cp = math.hypot(m[0, 0], m[1, 0])
    pitch = math.atan2(sp, cp)
    if cp < 1e-9:
        # Gimbal lock: only yaw - roll (pitch > 0) or yaw + roll (pitch < 0) is defined.
        return np.array([0.0, pitch, math.atan2(-m[0, 1], m[1, 1])])
    return np.array([math.atan2(m[2, 1], m[2, 2]), pitch, math.atan2(m[1, 0], m[0, 0])])


# --- quaternions ---------------------------------------------------------------------------------


def quat_normalize(q: npt.ArrayLike) -> Array:
    """Return ``q`` scaled to unit norm; raises ``ValueError`` for a zero quaternion."""
    a = np.asarray(q, dtype=np.float64)
    if a.shape != (4,):
        raise ValueError(f"quaternion must have shape (4,), got {a.shape}")
    n = float(np.linalg.norm(a))
    if not n > 1e-12:
        raise ValueError("cannot normalize a zero quaternion")
    return a / n


def quat_multiply(a: npt.ArrayLike, b: npt.ArrayLike) -> Array:
    """Hamilton product ``a * b`` of quaternions (w, x, y, z): rotation ``a`` after ``b``."""
    aw, ax, ay, az = np.asarray(a, dtype=np.float64)
    bw, bx, by, bz = np.asarray(b, dtype=np.float64)
    return np.array(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ]
    )


def quat_conjugate(q: npt.ArrayLike) -> Array:
    """Conjugate (the inverse of a unit quaternion)."""
    w, x, y, z = np.asarray(q, dtype=np.float64)
    return np.array([w, -x, -y, -z])


def quat_to_matrix(q: npt.ArrayLike) -> Array:
    """Rotation matrix of a quaternion (w, x, y, z); the quaternion is normalized first."""
    w, x, y, z = quat_normalize(q)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


def matrix_to_quat(r: npt.ArrayLike) -> Array:
    """Unit quaternion (w, x, y, z) of a rotation matrix, with ``w >= 0``.

    Uses Shepperd's method (branch on the largest diagonal term), accurate near 180°.
    """
    m = _mat(r, (3, 3), "rotation")
    tr = m[0, 0] + m[1, 1] + m[2, 2]
    diag = (tr, m[0, 0], m[1, 1], m[2, 2])
    k = int(np.argmax(diag))
    if k == 0:
        s = 2.0 * math.sqrt(max(1.0 + tr, 0.0))
        q = [0.25 * s, (m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s]
    elif k == 1:
        s = 2.0 * math.sqrt(max(1.0 + m[0, 0] - m[1, 1] - m[2, 2], 0.0))
        q = [(m[2, 1] - m[1, 2]) / s, 0.25 * s, (m[0, 1] + m[1, 0]) / s, (m[0, 2] + m[2, 0]) / s]
    elif k == 2:
        s = 2.0 * math.sqrt(max(1.0 - m[0, 0] + m[1, 1] - m[2, 2], 0.0))
        q = [(m[0, 2] - m[2, 0]) / s, (m[0, 1] + m[1, 0]) / s, 0.25 * s, (m[1, 2] + m[2, 1]) / s]
    else:
        s = 2.0 * math.sqrt(max(1.0 - m[0, 0] - m[1, 1] + m[2, 2], 0.0))
        q = [(m[1, 0] - m[0, 1]) / s, (m[0, 2] + m[2, 0]) / s, (m[1, 2] + m[2, 1]) / s, 0.25 * s]
    out = np.array(q)
    out /= np.linalg.norm(out)
    return -out if out[0] < 0.0 else out


def quat_to_rotvec(q: npt.ArrayLike) -> Array:
    """Rotation vector (angle in [0, pi] times unit axis) of a quaternion (w, x, y, z)."""
    w, x, y, z = quat_normalize(q)
    if w < 0.0:
        w, x, y, z = -w, -x, -y, -z
    v = np.array([x, y, z])
    n = math.sqrt(x * x + y * y + z * z)
    # For tiny n, angle = 2 atan2(n, w) ~ 2 n / w: the vector is ~ (2 / w) v (error O(n^3)).
    scale = 2.0 / float(w) if n < _SMALL else 2.0 * math.atan2(n, float(w)) / n
    out: Array = scale * v
    return out


def rotvec_to_quat(v: npt.ArrayLike) -> Array:
    """Quaternion (w, x, y, z) of a rotation vector."""
    a = _vec3(v, "rotation vector")
    angle = float(np.linalg.norm(a))
    if angle < _SMALL:
        return quat_normalize(np.array([1.0 - angle * angle / 8.0, *(0.5 * a)]))
    return np.array([math.cos(angle / 2.0), *(math.sin(angle / 2.0) / angle * a)])


def quat_to_rpy(q: npt.ArrayLike) -> Array:
    """Roll-pitch-yaw of a quaternion (w, x, y, z)."""
    return matrix_to_rpy(quat_to_matrix(q))


def rpy_to_quat(rpy: npt.ArrayLike) -> Array:
    """Quaternion (w, x, y, z) of URDF roll-pitch-yaw."""
    return matrix_to_quat(rpy_to_matrix(rpy))


# --- axis-angle and SO(3) ----------------------------------------------------------------------


def axis_angle_to_matrix(axis: npt.ArrayLike, angle: float) -> Array:
    """Rotation by ``angle`` [rad] about ``axis`` (normalized here; must not be zero)."""
    a = _vec3(axis, "axis")
    n = float(np.linalg.norm(a))
    if not n > 1e-12:
        raise ValueError("rotation axis must not be zero")
    return so3_exp(a * (angle / n))


def matrix_to_axis_angle(r: npt.ArrayLike) -> tuple[Array, float]:
    """Unit axis and angle in [0, pi] of a rotation; the axis is x for the identity."""
    v = so3_log(r)
    angle = float(np.linalg.norm(v))
    if angle < 1e-15:
        return np.array([1.0, 0.0, 0.0]), 0.0
    return v / angle, angle


def so3_exp(w: npt.ArrayLike) -> Array:
    """Rotation matrix of a rotation vector (Rodrigues' formula)."""
    x, y, z = _vec3(w, "rotation vector")
    t2 = x * x + y * y + z * z
    theta = math.sqrt(t2)
    if theta < _SMALL:
        a = 1.0 - t2 / 6.0
        b = 0.5 - t2 / 24.0
    else:
        a = math.sin(theta) / theta
        b = (1.0 - math.cos(theta)) / t2
    return np.array(
        [
            [1.0 - b * (y * y + z * z), b * x * y - a * z, b * x * z + a * y],
            [b * x * y + a * z, 1.0 - b * (x * x + z * z), b * y * z - a * x],
            [b * x * z - a * y, b * y * z + a * x, 1.0 - b * (x * x + y * y)],
        ]
    )


def so3_exp_batch(w: npt.ArrayLike) -> Array:
    """Rotation matrices ``(..., 3, 3)`` of rotation vectors ``(..., 3)``, vectorised."""
    v = np.asarray(w, dtype=np.float64)
    t2 = np.einsum("...i,...i->...", v, v)
    theta = np.sqrt(t2)
    small = theta < _SMALL
    safe = np.where(small, 1.0, theta)
    a = np.where(small, 1.0 - t2 / 6.0, np.sin(safe) / safe)
    b = np.where(small, 0.5 - t2 / 24.0, (1.0 - np.cos(safe)) / (safe * safe))
    x, y, z = v[..., 0], v[..., 1], v[..., 2]
    out = np.empty((*v.shape[:-1], 3, 3))
    out[..., 0, 0] = 1.0 - b * (y * y + z * z)
    out[..., 0, 1] = b * x * y - a * z
    out[..., 0, 2] = b * x * z + a * y
    out[..., 1, 0] = b * x * y + a * z
    out[..., 1, 1] = 1.0 - b * (x * x + z * z)
    out[..., 1, 2] = b * y * z - a * x
    out[..., 2, 0] = b * x * z - a * y
    out[..., 2, 1] = b * y * z + a * x
    out[..., 2, 2] = 1.0 - b * (x * x + y * y)
    return out


def so3_log(r: npt.ArrayLike) -> Array:
    """Rotation vector of a rotation matrix, angle in [0, pi] (robust near 0 and pi)."""
    return quat_to_rotvec(matrix_to_quat(r))


def so3_left_jacobian(w: npt.ArrayLike) -> Array:
    """Left Jacobian ``V`` of SO(3) at ``w`` (it maps ``v`` to the translation of ``se3_exp``)."""
    a = _vec3(w, "rotation vector")
    t2 = float(a @ a)
    theta = math.sqrt(t2)
    k = skew(a)
    if theta < _SMALL:
        b, c = 0.5 - t2 / 24.0, 1.0 / 6.0 - t2 / 120.0
    else:
        b = (1.0 - math.cos(theta)) / t2
        c = (theta - math.sin(theta)) / (t2 * theta)
    return np.eye(3) + b * k + c * (k @ k)


def so3_left_jacobian_inverse(w: npt.ArrayLike) -> Array:
    """Inverse of :func:`so3_left_jacobian` (defined for angles below 2 pi)."""
    a = _vec3(w, "rotation vector")
    t2 = float(a @ a)
    theta = math.sqrt(t2)
    k = skew(a)
    if theta < _SMALL:
        c = 1.0 / 12.0 + t2 / 720.0
    else:
        c = (1.0 - theta * math.sin(theta) / (2.0 * (1.0 - math.cos(theta)))) / t2
    return np.eye(3) - 0.5 * k + c * (k @ k)


# --- SE(3) -------------------------------------------------------------------------------------


def se3_exp(xi: npt.ArrayLike) -> Array:
    """Transform ``exp(xi^)`` of a twist ``xi = (v, w)`` (linear part first)."""
    a = np.asarray(xi, dtype=np.float64)
    if a.shape != (6,):
        raise ValueError(f"twist must have shape (6,), got {a.shape}")
    t = np.eye(4)
    t[:3, :3] = so3_exp(a[3:])
    t[:3, 3] = so3_left_jacobian(a[3:]) @ a[:3]
    return t


def se3_log(t: npt.ArrayLike) -> Array:
    """Twist ``(v, w)`` with ``se3_exp(xi) == t`` (rotation angle in [0, pi])."""
    m = _mat(t, (4, 4), "transform")
    w = so3_log(m[:3, :3])
    return np.concatenate([so3_left_jacobian_inverse(w) @ m[:3, 3], w])


def adjoint(t: npt.ArrayLike) -> Array:
    """6 x 6 adjoint of a transform, for twists ordered ``(v, w)``: ``xi_a = Ad(T_ab) xi_b``."""
    m = _mat(t, (4, 4), "transform")
    r = m[:3, :3]
    out = np.zeros((6, 6))
    out[:3, :3] = r
    out[3:, 3:] = r
    out[:3, 3:] = skew(m[:3, 3]) @ r
    return out


def pose_error(t_current: npt.ArrayLike, t_target: npt.ArrayLike) -> tuple[Array, Array]:
    """Error from a current pose to a target pose, both expressed in the same frame.

    Returns:
        ``(position_error, rotation_error)``: ``p_target - p_current`` and the rotation vector
        ``log(R_target @ R_current^T)``, both in the common frame, so that moving the current
        pose by this linear and angular displacement (a geometric Jacobian's units) reaches
        the target. Norms are the distance [m] and the angle [rad] between the poses.
    """
    c = _mat(t_current, (4, 4), "current pose")
    g = _mat(t_target, (4, 4), "target pose")
    return g[:3, 3] - c[:3, 3], so3_log(g[:3, :3] @ c[:3, :3].T)


def rotation_between(a: npt.ArrayLike, b: npt.ArrayLike) -> Array:
    """Smallest rotation taking the direction ``a`` onto the direction ``b`` (both non-zero)."""
    u = _vec3(a, "a") / np.linalg.norm(a)
    v = _vec3(b, "b") / np.linalg.norm(b)
    c = float(u @ v)
    axis = np.cross(u, v)
    s = float(np.linalg.norm(axis))
    if s < 1e-12:
        if c > 0.0:
            return np.eye(3)
        # Opposite directions: half a turn about any axis perpendicular to a.
        perp = np.cross(u, [1.0, 0.0, 0.0] if abs(u[0]) < 0.9 else [0.0, 1.0, 0.0])
        return so3_exp(math.pi * perp / np.linalg.norm(perp))
    return so3_exp(axis / s * math.atan2(s, c))
