"""Per-chain evaluation context for the iterative solvers: FK, Jacobian, task errors.

Scalar serial chains use the generated ``ScalarKernel``; chains with planar or
floating joints go through ``Chain.fk_jacobian`` and ``Chain.integrate``. Either
way the solvers see Python lists: a pose as 12 floats (top 3x4 block,
row-major) and a Jacobian as ``dof`` columns of 6 floats.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from hilbot.kinematics.codegen.scalar_kernel import ScalarKernel
from hilbot.kinematics.ik.core.chain_info import ChainInfo
from hilbot.kinematics.ik.core.residual import rotation_error
from hilbot.kinematics.ik.core.target import OrientationKind, Target

Pose = list[float]  # 12 floats: the top 3x4 block of a transform, row-major
Columns = list[list[float]]  # dof columns of 6 floats (linear, angular)
_NEAR_PI = math.pi - 1e-4


class Evaluation(NamedTuple):
    """One evaluation of a task at a configuration."""

    error: list[float]  # 3 or 6 entries: position error [m], then rotation vector [rad]
    columns: Columns  # the Jacobian columns matching ``error`` (angular part projected)
    position: float  # position residual [m]
    orientation: float | None  # orientation residual [rad]


class Context:
    """Everything an iterative solver evaluates on one chain.

    Attributes:
        info: the chain's ``ChainInfo``.
        dof: number of columns.
        scalar: the chain has only scalar joints (``q + dq`` integrates).
        fused: the chain's fused DLS iterations (``codegen.fused_step``), keyed by the
            task rows, the box and the solver's settings.
    """

    def __init__(self, info: ChainInfo) -> None:
        self.info = info
        self.dof = info.dof
        self.chain = info.chain
        kernel = ScalarKernel(info.chain) if info.scalar else None
        self.scalar = kernel is not None and kernel.supported
        self.fused: dict[tuple[Any, ...], Callable[..., Any]] = {}
        self.fk_jacobian: Callable[[list[float]], tuple[Pose, Columns]]
        self.fk: Callable[[list[float]], Pose]
        if self.scalar:
            assert kernel is not None
            self.fk_jacobian = kernel.fk_jacobian
            self.fk = kernel.fk
            self.kernel: ScalarKernel | None = kernel
        else:
            self.fk_jacobian = self._chain_fk_jacobian
            self.fk = self._chain_fk
            self.kernel = None

    def _chain_fk_jacobian(self, q: list[float]) -> tuple[Pose, Columns]:
        pose, jac = self.chain.fk_jacobian(np.array(q))
        return pose[:3].reshape(12).tolist(), jac.T.tolist()

    def _chain_fk(self, q: list[float]) -> Pose:
        return list(self.chain.fk(np.array(q))[:3].reshape(12).tolist())

    def integrate(self, q: list[float], dq: list[float]) -> list[float]:
        """``q`` moved by ``dq``."""
        if self.scalar:
            return [a + b for a, b in zip(q, dq, strict=True)]
        return list(self.chain.integrate(np.array(q), np.array(dq)).tolist())


def evaluate(task: Target, pose: Pose, columns: Columns) -> Evaluation:
    """Errors and the matching Jacobian columns of ``task`` at ``pose``."""
    tx, ty, tz = task.point
    ex, ey, ez = tx - pose[3], ty - pose[7], tz - pose[11]
    position = math.sqrt(ex * ex + ey * ey + ez * ez)
    kind = task.kind
    if kind is OrientationKind.NONE:
        return Evaluation([ex, ey, ez], columns, position, None)
    if kind is OrientationKind.FULL:
        wx, wy, wz, angle = _rotation_error(task.orientation, pose)
        return Evaluation([ex, ey, ez, wx, wy, wz], columns, position, angle)
    return _axis(task.orientation, pose, columns, [ex, ey, ez], position)


def weighted_cost(task: Target, pose: Pose, w2: float) -> float:
    """``|position error|² + w2 · angle²`` of ``task`` at ``pose`` (the DLS cost)."""
    ev = evaluate(task, pose, [])
    angle = 0.0 if ev.orientation is None else ev.orientation
    return ev.position * ev.position + w2 * angle * angle


def _rotation_error(t: tuple[float, ...], p: Pose) -> tuple[float, float, float, float]:
    """Rotation vector of ``R_t R^T`` and its angle, from scalars (numpy near pi)."""
    t00, t01, t02, t10, t11, t12, t20, t21, t22 = t
    p00, p01, p02, p10, p11, p12, p20, p21, p22 = (
        p[0], p[1], p[2], p[4], p[5], p[6], p[8], p[9], p[10],
    )  # fmt: skip
    # m = R_t R^T; m_ij = t_i . p_j (rows)
    trace = (
        t00 * p00 + t01 * p01 + t02 * p02
        + t10 * p10 + t11 * p11 + t12 * p12
        + t20 * p20 + t21 * p21 + t22 * p22
    )  # fmt: skip
    vx = (t20 * p10 + t21 * p11 + t22 * p12) - (t10 * p20 + t11 * p21 + t12 * p22)
    vy = (t00 * p20 + t01 * p21 + t02 * p22) - (t20 * p00 + t21 * p01 + t22 * p02)
    vz = (t10 * p00 + t11 * p01 + t12 * p02) - (t00 * p10 + t01 * p11 + t02 * p12)
    s2 = math.sqrt(vx * vx + vy * vy + vz * vz)
    angle = math.atan2(0.5 * s2, 0.5 * (trace - 1.0))
    if angle < _NEAR_PI:
        k = angle / s2 if s2 > 1e-12 else 0.5
        return vx * k, vy * k, vz * k, angle
    target = np.array(t).reshape(3, 3)
    current = np.array(p).reshape(3, 4)
    rotvec, angle = rotation_error(target, current)
    x, y, z = rotvec.tolist()
    return x, y, z, angle


def _axis(
    axis: tuple[float, ...], pose: Pose, columns: Columns, error: list[float], position: float
) -> Evaluation:
    """Tool-axis error; the angular columns lose their component along the z-axis."""
    ax, ay, az = axis
    zx, zy, zz = pose[2], pose[6], pose[10]
    cx, cy, cz = zy * az - zz * ay, zz * ax - zx * az, zx * ay - zy * ax
    s = math.sqrt(cx * cx + cy * cy + cz * cz)
    angle = math.atan2(s, zx * ax + zy * ay + zz * az)
    if s > 1e-12:
        k = angle / s
        error += [cx * k, cy * k, cz * k]
    elif angle < 1.0:
        error += [0.0, 0.0, 0.0]
    else:  # opposite: half a turn about an axis perpendicular to z
        px, py, pz = (0.0, zz, -zy) if abs(zx) < 0.9 else (-zz, 0.0, zx)
        n = math.pi / math.sqrt(px * px + py * py + pz * pz)
        error += [px * n, py * n, pz * n]
    projected = []
    for c in columns:
        d = zx * c[3] + zy * c[4] + zz * c[5]
        projected.append([c[0], c[1], c[2], c[3] - zx * d, c[4] - zy * d, c[5] - zz * d])
    return Evaluation(error, projected, position, angle)


def contexts(cache: dict[int, Context], info: ChainInfo) -> Context:
    """The cached ``Context`` of ``info``'s chain."""
    ctx = cache.get(id(info.chain))
    if ctx is None or ctx.info is not info:
        ctx = cache[id(info.chain)] = Context(info)
    return ctx


__all__ = ["Context", "Evaluation", "contexts", "evaluate", "weighted_cost"]
