"""``qp.task_rows`` on a batch axis: weighted rows ``(A, b)`` and residuals of B worlds.

The formulas, clamps and operation order are those of ``qp.task_rows`` (and of
``residual.rotation_error`` / ``residual.axis_error``), written on (B,) arrays,
so each world's rows equal the single-world rows to rounding.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from hilbot.kinematics.ik.batch.inputs import BatchTargets
from hilbot.kinematics.ik.core.residual import axis_error, rotation_error
from hilbot.kinematics.ik.core.target import OrientationKind

Array = NDArray[np.float64]

_MAX_POSITION_ERROR = 0.2  # [m] per iteration, as qp.py
_MAX_ROTATION_ERROR = 0.6  # [rad] per iteration, as qp.py
_NEAR_PI = math.pi - 1e-4  # as residual.py


Targets = BatchTargets  # points (B, 3), rotations (B, 3, 3) or axes (B, 3), or None


class Rows(NamedTuple):
    """Rows of B worlds: ``A`` (B, k, n), ``b`` (B, k), residuals (B,) [m] and angles (B,) [rad].

    ``angle`` is NaN for position-only targets.
    """

    a: Array
    b: Array
    residual: Array
    angle: Array


def errors(
    pose: Array, targets: Targets, *, exact: bool = True
) -> tuple[Array, Array, Array, Array]:
    """Position error (B, 3), its norm (B,), rotation vector (B, 3) and angle (B,) at ``pose``.

    Args:
        pose: (B, 3, 4) or (B, 4, 4) poses of the target link.
        targets: the targets.
        exact: the single-world code's last bits (``math.atan2``); ``False``: numpy's
            faster ``arctan2`` (equal to rounding).
    """
    p = targets.point - pose[:, :3, 3]
    residual = _norm(p[:, 0], p[:, 1], p[:, 2])
    if targets.kind is OrientationKind.NONE:
        size = p.shape[0]
        return p, residual, np.zeros((size, 3)), np.full(size, np.nan)
    assert targets.orientation is not None
    atan2 = _atan2 if exact else np.arctan2
    if targets.kind is OrientationKind.FULL:
        dw, angle = _rotation_errors(targets.orientation, pose, atan2)
    else:
        dw, angle = _axis_errors(targets.orientation, pose, atan2)
    return p, residual, dw, angle


def task_rows_batch(
    pose: Array,
    jac: Array,
    targets: Targets,
    position_weight: float,
    orientation_weight: Array,
    *,
    exact: bool = True,
) -> Rows:
    """The weighted rows of every world (``qp.task_rows`` per world).

    Args:
        pose: (B, 3, 4) or (B, 4, 4) poses of the target link.
        jac: (B, 6, n) its Jacobians.
        targets: the targets.
        position_weight: weight of the position rows.
        orientation_weight: (B,) weight of the orientation rows of each world.
        exact: as in ``errors``.
    """
    p, residual, dw, angle = errors(pose, targets, exact=exact)
    scale = np.where(
        residual > _MAX_POSITION_ERROR,
        position_weight * (_MAX_POSITION_ERROR / np.where(residual > 0.0, residual, 1.0)),
        position_weight,
    )
    if targets.kind is OrientationKind.NONE:
        return Rows(position_weight * jac[:, :3], p * scale[:, None], residual, angle)
    a = jac * position_weight
    if targets.kind is OrientationKind.AXIS:
        z = pose[:, :3, 2]
        along = (z[:, None, :] @ jac[:, 3:])[:, 0, :]  # z @ J_w, as the scalar code's gemv
        a[:, 3:] = jac[:, 3:] - z[:, :, None] * along[:, None, :]
    a[:, 3:] *= (orientation_weight / position_weight)[:, None, None]
    rscale = np.where(
        angle > _MAX_ROTATION_ERROR,
        orientation_weight * (_MAX_ROTATION_ERROR / np.where(angle > 0.0, angle, 1.0)),
        orientation_weight,
    )
    b = np.concatenate([p * scale[:, None], dw * rscale[:, None]], axis=1)
    return Rows(a, b, residual, angle)


def _rotation_errors(
    target: Array, pose: Array, atan2: Callable[[Array, Array], Array]
) -> tuple[Array, Array]:
    """``residual.rotation_error`` per world: target (B, 3, 3), pose (B, >=3, >=3)."""
    m = target @ pose[:, :3, :3].transpose(0, 2, 1)
    vx = m[:, 2, 1] - m[:, 1, 2]
    vy = m[:, 0, 2] - m[:, 2, 0]
    vz = m[:, 1, 0] - m[:, 0, 1]
    s2 = _norm(vx, vy, vz)
    angle = atan2(0.5 * s2, 0.5 * (m[:, 0, 0] + m[:, 1, 1] + m[:, 2, 2] - 1.0))
    scale = np.where(s2 > 1e-12, angle / np.where(s2 > 1e-12, s2, 1.0), 0.5)
    dw = np.stack([vx * scale, vy * scale, vz * scale], axis=1)
    for b in np.flatnonzero(angle >= _NEAR_PI):  # near a half turn: the scalar robust path
        dw[b], angle[b] = rotation_error(target[b], pose[b])
    return dw, angle


def _axis_errors(
    axis: Array, pose: Array, atan2: Callable[[Array, Array], Array]
) -> tuple[Array, Array]:
    """``residual.axis_error`` per world: axes (B, 3), pose (B, >=3, >=3)."""
    z = pose[:, :3, 2]
    zx, zy, zz = z[:, 0], z[:, 1], z[:, 2]
    ax, ay, az = axis[:, 0], axis[:, 1], axis[:, 2]
    c = np.stack([zy * az - zz * ay, zz * ax - zx * az, zx * ay - zy * ax], axis=1)
    s = _norm(c[:, 0], c[:, 1], c[:, 2])
    angle = atan2(s, zx * ax + zy * ay + zz * az)
    k = angle / np.where(s > 1e-12, s, 1.0)
    dw = c * k[:, None]
    for b in np.flatnonzero(s <= 1e-12):  # parallel or opposite axes: the scalar path
        dw[b], angle[b] = axis_error(axis[b], pose[b])
    return dw, angle


def _norm(x: Array, y: Array, z: Array) -> Array:
    """``sqrt(x² + y² + z²)`` summed in the scalar code's order (einsum may pair differently)."""
    return np.sqrt(x * x + y * y + z * z)


def _atan2(y: Array, x: Array) -> Array:
    """``math.atan2`` per element: numpy's SIMD ``arctan2`` differs from libm in the last bit.

    One bit matters here: on a redundant arm the damping is ~1e-9, so a last-bit
    difference in the error grows to ~1e-9 in the result over an iteration or two.
    """
    return np.array(list(map(math.atan2, y.tolist(), x.tolist())))


__all__ = ["Rows", "Targets", "errors", "task_rows_batch"]
