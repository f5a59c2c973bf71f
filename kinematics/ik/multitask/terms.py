"""Least-squares rows ``(A, b)`` (``|A dq - b|^2``) and gradients for the multi-task solver."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from hilbot.kinematics.ik.core.residual import axis_error, rotation_error
from hilbot.kinematics.ik.core.target import OrientationKind
from hilbot.kinematics.ik.multitask.model import TreeContext, TreeModel
from hilbot.kinematics.ik.multitask.tasks import (
    ElbowHint,
    FrameTask,
    JointLimitTask,
    ManipulabilityTask,
    PostureTask,
    RestTask,
    SelfCollision,
)
from hilbot.kinematics.ik.qp.limits.collision_avoidance import CollisionAvoidance, point_jacobian

Array = NDArray[np.float64]

MAX_POSITION_ERROR = 0.2  # [m] per iteration: keeps the linearisation honest far away
MAX_ROTATION_ERROR = 0.6  # [rad] per iteration


class FrameRows(NamedTuple):
    """Rows of one frame task and its residuals at the current configuration."""

    a: Array  # (k, nv)
    b: Array  # (k,)
    residual: float  # [m], to the (reach-clamped) target
    orientation_residual: float | None  # [rad]
    cost: float  # unclamped weighted squared error


def clamp_reach(target: Array, base: Array, max_reach: float) -> Array:
    """Pull ``target`` in along the line from ``base`` to at most ``max_reach`` from it."""
    d = target - base
    distance = math.sqrt(float(d @ d))
    if distance <= max_reach:
        return target
    return base + d * (max_reach / distance)


def frame_rows(ctx: TreeContext, task: FrameTask, max_reach: float | None) -> FrameRows:
    """Rows of a frame task, with a moving source when ``task.source_link`` is set."""
    pose, jac = ctx.frame(task.link)
    target = task.parsed
    rotation, axis = target.rotation, target.axis
    if task.source_link is None:
        p_star = target.position
        if max_reach is not None:
            p_star = clamp_reach(p_star, ctx.model.base_point(task.link, ctx.q), max_reach)
        a = jac.copy()
    else:
        pose_s, jac_s = ctx.frame(task.source_link)
        rot_s = pose_s[:3, :3]
        p_star = rot_s @ target.position + pose_s[:3, 3]
        rotation = None if rotation is None else rot_s @ rotation
        axis = None if axis is None else rot_s @ axis
        a = jac - jac_s
        a[:3] = jac[:3] - point_jacobian(jac_s, pose_s[:3, 3], p_star)
    px, py, pz = (p_star - pose[:3, 3]).tolist()
    residual = math.sqrt(px * px + py * py + pz * pz)
    wp, wo = task.position_weight, task.orientation_weight
    cost = (wp * residual) ** 2
    scale = wp if residual <= MAX_POSITION_ERROR else wp * MAX_POSITION_ERROR / residual
    if target.kind is OrientationKind.NONE:
        return FrameRows(wp * a[:3], np.array((px, py, pz)) * scale, residual, None, cost)
    if rotation is not None:
        dw, angle = rotation_error(rotation, pose)
    else:
        assert axis is not None
        dw, angle = axis_error(axis, pose)
        z = pose[:3, 2]
        a[3:] -= np.outer(z, z @ a[3:])  # spinning about the tool axis is free
    if wo == 0.0:
        return FrameRows(wp * a[:3], np.array((px, py, pz)) * scale, residual, angle, cost)
    cost += (wo * angle) ** 2
    rscale = wo if angle <= MAX_ROTATION_ERROR else wo * MAX_ROTATION_ERROR / angle
    wx, wy, wz = dw.tolist()
    b = np.array((px * scale, py * scale, pz * scale, wx * rscale, wy * rscale, wz * rscale))
    a[:3] *= wp
    a[3:] *= wo
    if wp == 0.0:
        return FrameRows(a[3:], b[3:], residual, angle, cost)
    return FrameRows(a, b, residual, angle, cost)


def hint_rows(ctx: TreeContext, hint: ElbowHint) -> tuple[Array, Array]:
    """Position rows pulling ``hint.link`` towards ``hint.position``."""
    pose, jac = ctx.frame(hint.link)
    position = np.asarray(hint.position, dtype=np.float64)
    dp = position - pose[:3, 3]
    norm = math.sqrt(float(dp @ dp))
    if norm > MAX_POSITION_ERROR:
        dp = dp * (MAX_POSITION_ERROR / norm)
    return hint.weight * jac[:3], hint.weight * dp


def posture_rows(model: TreeModel, q: Array, task: PostureTask) -> tuple[Array, Array]:
    """Rows ``w (dq_i - (home_i - q_i))`` for the joints the posture lists.

    Raises:
        KeyError: the posture names a joint the model does not have.
    """
    unknown = [name for name in task.pose if name not in model.joints]
    if unknown:
        raise KeyError(f"PostureTask names joints {unknown} not in {sorted(model.joints)}")
    cols = [model.names.index(name) for name in task.pose]
    home = np.array([task.pose[name] for name in task.pose])
    a = np.zeros((len(cols), model.nv))
    a[np.arange(len(cols)), cols] = task.weight
    return a, task.weight * (home - q[cols])


def rest_rows(model: TreeModel, q: Array, q0: Array, task: RestTask) -> tuple[Array, Array]:
    """Rows ``w (dq - (q0 - q))``: stay near the start of the call."""
    return task.weight * np.eye(model.nv), task.weight * (q0 - q)


def joint_limit_rows(model: TreeModel, q: Array, task: JointLimitTask) -> tuple[Array, Array]:
    """Rows pushing joints inside the ``margin`` band next to a limit back out of it."""
    low = model.lower + task.margin - q  # > 0: inside the band at the lower end
    high = q - (model.upper - task.margin)  # > 0: inside the band at the upper end
    push = np.where(low > 0.0, low, 0.0) - np.where(high > 0.0, high, 0.0)
    active = np.flatnonzero(push)
    a = np.zeros((active.size, model.nv))
    a[np.arange(active.size), active] = task.weight
    return a, task.weight * push[active]


def collision_rows(
    ctx: TreeContext, task: SelfCollision, limit: CollisionAvoidance
) -> tuple[Array, Array]:
    """Soft rows pushing pairs closer than ``detection_distance`` apart.

    ``limit`` is the hard ``CollisionAvoidance`` built from the same pairs (it shares
    the closest-point evaluation at ``ctx``).
    """
    distance = limit.closest(ctx)[2]
    near = distance < task.detection_distance
    if not near.any():
        return np.zeros((0, ctx.model.nv)), np.zeros(0)
    rates, close = limit.rates(ctx, near)
    return task.weight * rates, task.weight * (task.detection_distance - close)


def log_manipulability(model: TreeModel, q: Array, link: str) -> float:
    """``log sqrt(det(J J'))`` of the position Jacobian of ``link`` (regularised)."""
    chain, cols = model.chain(link)
    jac = chain.jacobian(q[cols])[:3]
    gram = jac @ jac.T + 1e-12 * np.eye(3)
    return 0.5 * float(np.linalg.slogdet(gram)[1])


def manipulability_gradient(model: TreeModel, q: Array, task: ManipulabilityTask) -> Array:
    """Gradient (nv,) of ``weight * log manipulability`` by central differences."""
    _, cols = model.chain(task.link)
    grad = np.zeros(model.nv)
    eps = 1e-6
    for col in cols:
        step = np.zeros(model.nv)
        step[col] = eps
        plus = log_manipulability(model, q + step, task.link)
        minus = log_manipulability(model, q - step, task.link)
        grad[col] = (plus - minus) / (2 * eps)
    return task.weight * grad
