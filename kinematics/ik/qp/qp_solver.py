"""``QPSolver``: weighted task error under hard limits, one small QP per iteration (as mink).

Each iteration linearises the target error ``e`` at ``q`` and solves

    ``min_dq  || W (J dq - e) ||^2 + (damping + lm_damping |W e|^2) || dq ||^2``
    ``s.t.    lower <= dq <= upper   (call box, ConfigurationLimit, VelocityLimit)``
    ``        G dq <= h              (LinearInequality, CollisionAvoidance)``

with the dense solvers of ``qp.dense`` (box path when no limit adds rows). Limits
act inside every iteration, so the error is redistributed to the free joints; the
step is accepted only when it reduces the weighted error (backtracking halves it
otherwise), and every iterate stays feasible because the constraint set is convex
and contains ``dq = 0``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from hilbot.kinematics.errors import UnknownLink
from hilbot.kinematics.ik.core.box import Box
from hilbot.kinematics.ik.core.residual import axis_error, rotation_error
from hilbot.kinematics.ik.core.solution import SolveMeta, Status
from hilbot.kinematics.ik.core.solver import SolveOptions, Solver
from hilbot.kinematics.ik.core.target import OrientationKind, Target
from hilbot.kinematics.ik.qp.limits.collision_avoidance import CollisionAvoidance
from hilbot.kinematics.ik.qp.limits.configuration_limit import ConfigurationLimit
from hilbot.kinematics.ik.qp.limits.limit import Limit, check_limits, check_positive
from hilbot.kinematics.ik.qp.step import solve_step

Array = NDArray[np.float64]

_MAX_POSITION_ERROR = 0.2  # [m] per iteration: keeps the linearisation honest far away
_MAX_ROTATION_ERROR = 0.6  # [rad] per iteration
_BACKTRACKS = 4
_MAX_EXTRA_DAMPING = 1.0  # beyond this a rejected step means stalled
_SLOW_RATIO = 0.9  # at the max_delta box, a step keeping more of the error than this: stop


class ChainContext:
    """A ``LimitContext`` over one chain at one configuration (poses computed lazily)."""

    __slots__ = ("_jacobians", "_poses", "chain", "lower", "names", "q", "upper", "velocity_limit")

    def __init__(self, chain: Any, q: Array, names: tuple[str, ...]) -> None:
        self.chain = chain
        self.q = q
        self.lower: Array = chain.lower
        self.upper: Array = chain.upper
        self.velocity_limit: Array = chain.velocity_limit
        self.names = names
        self._poses: dict[str, Array] | None = None
        self._jacobians: dict[str, Array] = {}

    def pose(self, link: str) -> Array:
        """Pose (4, 4) of a link on the chain, in the chain's source frame.

        Raises:
            UnknownLink: ``link`` is not on the chain (``known`` lists the chain's links).
        """
        if self._poses is None:
            self._poses = self.chain.link_poses(self.q)
        try:
            return self._poses[link]
        except KeyError:
            # A limit's geometry must sit on the solved chain (role "link": the chain's
            # links are listed as the known ones).
            raise UnknownLink(link, "link", self.chain.links) from None

    def jacobian(self, link: str) -> Array:
        """Jacobian (6, dof) of a link on the chain, at its origin, in the source frame."""
        jac = self._jacobians.get(link)
        if jac is None:
            self.pose(link)  # names the chain's links when ``link`` is not one of them
            jac = self.chain.jacobian_at(link, self.q)
            self._jacobians[link] = jac
        return jac


class _Weights:
    __slots__ = ("orientation", "position")

    def __init__(self, position: float, orientation: float) -> None:
        self.position = position
        self.orientation = orientation


def task_rows(
    pose: Array, jac: Array, target: Target, weights: _Weights
) -> tuple[Array, Array, float, float | None]:
    """Weighted rows ``(A, b)`` of ``|A dq - b|^2`` and the residuals at ``pose``.

    Args:
        pose: (4, 4) current pose of the target link.
        jac: (6, nv) its Jacobian.
        target: the target.
        weights: position and orientation weights.

    Returns:
        ``(A (k, nv), b (k,), position residual [m], orientation residual [rad] or None)``.
    """
    px, py, pz = (target.position - pose[:3, 3]).tolist()
    residual = math.sqrt(px * px + py * py + pz * pz)
    scale = weights.position
    if residual > _MAX_POSITION_ERROR:
        scale *= _MAX_POSITION_ERROR / residual
    if target.kind is OrientationKind.NONE:
        b = np.array((px * scale, py * scale, pz * scale))
        return weights.position * jac[:3], b, residual, None
    a = jac * weights.position
    if target.kind is OrientationKind.FULL:
        assert target.rotation is not None
        dw, angle = rotation_error(target.rotation, pose)
    else:
        assert target.axis is not None
        dw, angle = axis_error(target.axis, pose)
        z = pose[:3, 2]
        a[3:] = jac[3:] - np.outer(z, z @ jac[3:])  # spinning about the tool axis is free
    a[3:] *= weights.orientation / weights.position
    rscale = weights.orientation
    if angle > _MAX_ROTATION_ERROR:
        rscale *= _MAX_ROTATION_ERROR / angle
    wx, wy, wz = dw.tolist()
    b = np.array((px * scale, py * scale, pz * scale, wx * rscale, wy * rscale, wz * rscale))
    return a, b, residual, angle


class QPSolver(Solver):
    """IK as a sequence of small QPs with hard limits (see the module docstring).

    Args:
        limits: extra hard limits (``VelocityLimit``, ``LinearInequality``,
            ``CollisionAvoidance`` over links of the solved chain ...). A
            ``ConfigurationLimit`` is added when none is given and the call
            respects limits; the call's box (limits ∩ ``max_delta``) always applies.
        position_weight: weight of the position error rows.
        orientation_weight: weight of the orientation error rows [m/rad]: how many
            metres of position error one radian is worth.
        damping: constant Tikhonov damping on ``dq``, > 0.
        lm_damping: Levenberg-Marquardt damping, scaled by the squared weighted error:
            large far from the target (short, safe steps), vanishing at it.

    Example:
        >>> solver = QPSolver([VelocityLimit(dt=0.01)])  # doctest: +SKIP
        >>> solver.solve(robot, state, "base_link", "tool0", pose, max_delta=0.05)  # doctest: +SKIP
    """

    def __init__(
        self,
        limits: Sequence[Limit] = (),
        *,
        position_weight: float = 1.0,
        orientation_weight: float = 0.3,
        damping: float = 1e-9,
        lm_damping: float = 1e-3,
    ) -> None:
        super().__init__()
        self.limits = check_limits(limits)
        self._has_configuration_limit = any(
            isinstance(limit, ConfigurationLimit) for limit in self.limits
        )
        self._default_limits = (*self.limits, ConfigurationLimit())
        self.position_weight = check_positive("position_weight", position_weight)
        self.orientation_weight = check_positive("orientation_weight", orientation_weight)
        self.damping = check_positive("damping", damping)
        self.lm_damping = check_positive("lm_damping", lm_damping, allow_zero=True)
        self._eyes: dict[int, Array] = {}

    def _limits_for(self, options: SolveOptions) -> tuple[Limit, ...]:
        if options.respect_limits and not self._has_configuration_limit:
            return self._default_limits
        if not options.respect_limits:
            return tuple(lim for lim in self.limits if not isinstance(lim, ConfigurationLimit))
        return self.limits

    def _solve(
        self, chain: Any, q0: Array, target: Target, box: Box, options: SolveOptions
    ) -> tuple[Array, SolveMeta]:
        """Iterate QP steps from ``q0`` (see the module docstring)."""
        info = self.info(chain)
        limits = self._limits_for(options)
        weights = _Weights(self.position_weight, self.orientation_weight)
        point = _evaluate(chain, q0.copy(), target, weights)
        status = Status.TIMEOUT
        iteration = 0
        extra = 0.0  # damping added after a rejected step (Levenberg-Marquardt style)
        for iteration in range(1, options.max_iterations + 1):
            if _done(point.residual, point.angle, options):
                return point.q, SolveMeta(
                    iteration - 1, point.residual, point.angle, Status.CONVERGED
                )
            context = ChainContext(chain, point.q, info.names)
            dq, capped = self._step(point, extra, limits, context, box)
            new = _line_search(chain, info, point, dq, target, weights, limits, context)
            boxed = _at_delta(point.q, q0, options.max_delta)
            if new is None:
                if boxed:
                    status = Status.STALLED  # the per-call max_delta holds it: next call goes on
                    break
                if extra < _MAX_EXTRA_DAMPING:
                    extra = max(1e-4, 10.0 * extra)  # shorter, better-aligned steps
                    continue
                if _stuck_on_orientation(point.residual, point.angle, options, weights):
                    point = _evaluate_rows(point, target, weights)
                    extra = 0.0
                    continue
                status = _failure(point, dq)
                break
            extra = 0.1 * extra if extra > 1e-6 else 0.0
            cost_old = _true_cost(point.residual, point.angle, weights)
            cost_new = _true_cost(new.residual, new.angle, weights)
            point = new
            if boxed and cost_new > _SLOW_RATIO * cost_old:
                status = Status.STALLED  # crawling along the max_delta box: stop for this call
                break
            tiny = cost_old - cost_new < 1e-14 and not _done(point.residual, point.angle, options)
            # A step a limit held (velocity, joint, box) decreases the error linearly
            # by itself: that says nothing about a trade-off with the orientation.
            slow = not capped and _compromise(cost_old, cost_new, point.residual)
            if (tiny or slow) and _stuck_on_orientation(
                point.residual, point.angle, options, weights
            ):
                point = _evaluate_rows(point, target, weights)
                continue
            if tiny:
                status = Status.STALLED
                break
        else:
            if _done(point.residual, point.angle, options):
                status = Status.CONVERGED
        return point.q, SolveMeta(iteration, point.residual, point.angle, status)

    def _step(
        self, point: _Point, extra: float, limits: Sequence[Limit], context: ChainContext, box: Box
    ) -> tuple[Array, bool]:
        """The QP step ``dq`` at ``point`` and whether a constraint held it.

        Held: the unconstrained minimiser was outside the limits or the call's box
        (the QP solver had to activate a bound or a row).
        """
        n = point.q.shape[0]
        eye = self._eyes.get(n)
        if eye is None:
            eye = self._eyes[n] = np.eye(n)
        a, b = point.a, point.b
        h_mat = a.T @ a + (self.damping + extra + self.lm_damping * float(b @ b)) * eye
        q = point.q
        dq, result = solve_step(h_mat, -(a.T @ b), limits, context, box.lower - q, box.upper - q)
        return dq, result.iterations > 0


class _Point(NamedTuple):
    """The task evaluated at one configuration."""

    q: Array  # (dof,)
    pose: Array  # (4, 4)
    jac: Array  # (6, dof)
    a: Array  # weighted rows
    b: Array  # weighted (clamped) error
    residual: float  # [m]
    angle: float | None  # [rad]


def _evaluate(chain: Any, q: Array, target: Target, weights: _Weights) -> _Point:
    pose, jac = chain.fk_jacobian(q)
    a, b, residual, angle = task_rows(pose, jac, target, weights)
    return _Point(q, pose, jac, a, b, residual, angle)


def _evaluate_rows(point: _Point, target: Target, weights: _Weights) -> _Point:
    """The same configuration with the rows re-weighted."""
    a, b, residual, angle = task_rows(point.pose, point.jac, target, weights)
    return point._replace(a=a, b=b, residual=residual, angle=angle)


def _line_search(
    chain: Any,
    info: Any,
    point: _Point,
    dq: Array,
    target: Target,
    weights: _Weights,
    limits: Sequence[Limit],
    context: ChainContext,
) -> _Point | None:
    """The first of ``dq, dq/2, ...`` that lowers the error and keeps collision margins."""
    cost = _true_cost(point.residual, point.angle, weights)
    step = 1.0
    for _ in range(_BACKTRACKS):
        new = _evaluate(chain, _integrate(chain, info.scalar, point.q, step * dq), target, weights)
        if _true_cost(new.residual, new.angle, weights) < cost and _clear(
            limits, context, ChainContext(chain, new.q, info.names)
        ):
            return new
        step *= 0.5
    return None


def _at_delta(q: Array, q0: Array, max_delta: float | None) -> bool:
    """Whether some coordinate has used up the call's ``max_delta``."""
    if max_delta is None:
        return False
    return bool(np.max(np.abs(q - q0)) >= max_delta * (1.0 - 1e-9))


def _failure(point: _Point, dq: Array) -> Status:
    """Stalled when the model predicted (almost) no gain from ``dq``, diverged otherwise."""
    cost = float(point.b @ point.b)
    predicted = cost - float(np.sum((point.a @ dq - point.b) ** 2))
    return Status.STALLED if predicted <= 1e-6 * cost else Status.DIVERGED


def _clear(limits: Sequence[Limit], before: ChainContext, after: ChainContext) -> bool:
    """The true collision distances after a step respect the margins (see ``step_ok``)."""
    return all(
        limit.step_ok(before, after) for limit in limits if isinstance(limit, CollisionAvoidance)
    )


def _true_cost(residual: float, angle: float | None, weights: _Weights) -> float:
    """Unclamped weighted error used to accept or reject a step."""
    cost = (weights.position * residual) ** 2
    if angle is not None:
        cost += (weights.orientation * angle) ** 2
    return cost


def _done(residual: float, angle: float | None, options: SolveOptions) -> bool:
    if residual > options.tolerance:
        return False
    return angle is None or angle <= options.orientation_tolerance


def _compromise(cost_old: float, cost_new: float, residual: float) -> bool:
    """Linear convergence close to the target: position and orientation are trading off.

    Gauss-Newton converges quadratically when the target is consistent; a cost that
    only halves per step while the error is not clamped (and the step not held by a
    limit) means an unreachable orientation is pulling the position off (position
    should win, when not strict).
    """
    return residual < _MAX_POSITION_ERROR and cost_new > 0.5 * cost_old


def _stuck_on_orientation(
    residual: float, angle: float | None, options: SolveOptions, weights: _Weights
) -> bool:
    """Position wins: when stuck short of the position, relax the orientation weight.

    With ``strict_orientation`` the verdict changes (an unmet orientation raises),
    not the priority: the position is met first either way.
    """
    if angle is None or residual <= options.tolerance:
        return False
    if angle <= options.orientation_tolerance:
        return False
    if weights.orientation < 1e-6 * weights.position:
        return False
    weights.orientation *= 0.1
    return True


def _integrate(chain: Any, scalar: bool, q: Array, dq: Array) -> Array:
    if scalar:
        return q + dq
    return np.asarray(chain.integrate(q, dq), dtype=np.float64)


__all__ = ["ChainContext", "QPSolver", "task_rows"]
