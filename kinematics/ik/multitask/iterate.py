"""The multi-task iteration: a primary QP, then a secondary QP in its null space."""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from hilbot.kinematics.ik.core.solution import SolveMeta, Status
from hilbot.kinematics.ik.core.solver import SolveOptions
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
    Task,
)
from hilbot.kinematics.ik.multitask.terms import (
    MAX_POSITION_ERROR,
    collision_rows,
    frame_rows,
    hint_rows,
    joint_limit_rows,
    log_manipulability,
    manipulability_gradient,
    posture_rows,
    rest_rows,
)
from hilbot.kinematics.ik.qp.dense import QPStatus, solve_box_qp, solve_qp
from hilbot.kinematics.ik.qp.limits.collision_avoidance import CollisionAvoidance
from hilbot.kinematics.ik.qp.limits.limit import Limit
from hilbot.kinematics.ik.qp.step import gather

Array = NDArray[np.float64]
_BACKTRACKS = 5
_MAX_EXTRA_DAMPING = 1.0  # beyond this a rejected step means stalled
_NULL_TOLERANCE = 1e-6  # singular values below this fraction of the largest span the null space


class Problem(NamedTuple):
    """Everything one multi-task solve needs besides the seed and the box."""

    model: TreeModel
    primary: tuple[FrameTask, ...]
    secondary: tuple[Task, ...]
    limits: tuple[Limit, ...]
    max_reach: float | None
    prioritized: bool
    damping: float
    lm_damping: float
    secondary_damping: float
    collisions: tuple[tuple[SelfCollision, CollisionAvoidance], ...] = ()


class _Eval(NamedTuple):
    """The tasks evaluated at one configuration."""

    ctx: TreeContext
    a1: Array  # (k1, nv) primary rows
    b1: Array
    a2: Array  # (k2, nv) secondary rows
    b2: Array
    grad: Array  # (nv,) secondary gradient to climb (manipulability)
    residual: float
    orientation_residual: float | None
    primary_cost: float  # weighted squared error of the frame tasks
    merit: float  # primary cost plus the secondary costs


def evaluate(problem: Problem, q: Array, q0: Array) -> _Eval:
    """Rows, residuals and merit of every task at ``q``."""
    model = problem.model
    ctx = TreeContext(model, q)
    rows1: list[Array] = []
    rhs1: list[Array] = []
    residual = 0.0
    orientation: float | None = None
    merit = 0.0
    for task in problem.primary:
        fr = frame_rows(ctx, task, problem.max_reach)
        rows1.append(fr.a)
        rhs1.append(fr.b)
        residual = max(residual, fr.residual)
        if fr.orientation_residual is not None:
            orientation = max(orientation or 0.0, fr.orientation_residual)
        merit += fr.cost
    primary_cost = merit
    rows2: list[Array] = []
    rhs2: list[Array] = []
    grad = np.zeros(model.nv)
    for other in problem.secondary:
        if isinstance(other, ManipulabilityTask):
            grad += manipulability_gradient(model, q, other)
            merit -= 2.0 * other.weight * log_manipulability(model, q, other.link)
            continue
        a, b = _secondary_rows(problem, ctx, q, q0, other)
        rows2.append(a)
        rhs2.append(b)
        merit += float(b @ b)
    nv = model.nv
    a1, b1 = _stack(rows1, rhs1, nv)
    a2, b2 = _stack(rows2, rhs2, nv)
    return _Eval(ctx, a1, b1, a2, b2, grad, residual, orientation, primary_cost, merit)


def _stack(rows: list[Array], rhs: list[Array], nv: int) -> tuple[Array, Array]:
    if len(rows) == 1:
        return rows[0], rhs[0]
    if not rows:
        return np.zeros((0, nv)), np.zeros(0)
    return np.vstack(rows), np.concatenate(rhs)


def _secondary_rows(
    problem: Problem, ctx: TreeContext, q: Array, q0: Array, task: Task
) -> tuple[Array, Array]:
    model = ctx.model
    if isinstance(task, ElbowHint):
        return hint_rows(ctx, task)
    if isinstance(task, PostureTask):
        return posture_rows(model, q, task)
    if isinstance(task, RestTask):
        return rest_rows(model, q, q0, task)
    if isinstance(task, JointLimitTask):
        return joint_limit_rows(model, q, task)
    if isinstance(task, SelfCollision):
        limit = next(lim for t, lim in problem.collisions if t is task)
        return collision_rows(ctx, task, limit)
    raise TypeError(f"{type(task).__name__} is not a secondary task")


def _done(ev: _Eval, options: SolveOptions) -> bool:
    if ev.residual > options.tolerance:
        return False
    return (
        ev.orientation_residual is None or ev.orientation_residual <= options.orientation_tolerance
    )


def _primary_met(problem: Problem, ev: _Eval, options: SolveOptions) -> bool:
    """Every frame task within tolerance (orientation only where it has weight)."""
    if ev.residual > options.tolerance:
        return False
    if ev.orientation_residual is None:
        return True
    weighted = any(
        t.orientation_weight > 0.0 and t.parsed.kind is not OrientationKind.NONE
        for t in problem.primary
    )
    return not weighted or ev.orientation_residual <= options.orientation_tolerance


def iterate(
    problem: Problem, q0: Array, lower: Array, upper: Array, options: SolveOptions
) -> tuple[Array, SolveMeta]:
    """Run the two-level iterations from ``q0`` inside ``[lower, upper]``."""
    q = q0.copy()
    ev = evaluate(problem, q, q0)
    has_secondary = ev.a2.shape[0] > 0 or bool(ev.grad.any()) or _has_gradient(problem)
    status = Status.TIMEOUT
    iteration = 0
    extra = 0.0  # damping added after a rejected step (Levenberg-Marquardt style)
    for iteration in range(1, options.max_iterations + 1):
        met = _primary_met(problem, ev, options)
        if met and not has_secondary:
            return q, _meta(iteration - 1, ev, Status.CONVERGED)
        dq, capped = _step(problem, ev, q, lower, upper, extra)
        if float(np.max(np.abs(dq), initial=0.0)) < 1e-10:
            status = Status.CONVERGED if met else Status.STALLED
            break
        found = _line_search(problem, ev, q, dq, q0, options)
        if found is None:
            if extra < _MAX_EXTRA_DAMPING:
                extra = max(1e-4, 10.0 * extra)  # shorter, better-aligned steps
                continue
            if _orientation_in_the_way(ev, options) and (relaxed := _relax(problem)):
                problem = relaxed  # position wins over an unreachable orientation
                ev = evaluate(problem, q, q0)
                extra = 0.0
                continue
            status = Status.CONVERGED if met else Status.STALLED
            break
        q_new, ev_new = found
        extra = 0.1 * extra if extra > 1e-6 else 0.0
        gain = ev.merit - ev_new.merit
        # A step a limit held (velocity, joint, box) decreases the error linearly by
        # itself: that says nothing about a trade-off with the orientation.
        relax = not capped and _compromise(ev, ev_new, options)
        q, ev = q_new, ev_new
        if relax and (relaxed := _relax(problem)) is not None:
            problem = relaxed  # position wins over an unreachable orientation
            ev = evaluate(problem, q, q0)
            continue
        if _primary_met(problem, ev, options) and gain < 1e-12 * max(1.0, abs(ev.merit)):
            return q, _meta(iteration, ev, Status.CONVERGED)
    else:
        if _primary_met(problem, ev, options):
            status = Status.CONVERGED
    return q, _meta(iteration, ev, status)


def _line_search(
    problem: Problem, ev: _Eval, q: Array, dq: Array, q0: Array, options: SolveOptions
) -> tuple[Array, _Eval] | None:
    """The first of ``dq, dq/2, ...`` that is better (see ``_better``) and keeps margins."""
    step = 1.0
    for _ in range(_BACKTRACKS):
        q_new = problem.model.integrate(q, step * dq)
        ev_new = evaluate(problem, q_new, q0)
        if _better(problem, ev, ev_new, options) and _clear(problem, ev.ctx, ev_new.ctx):
            return q_new, ev_new
        step *= 0.5
    return None


def _orientation_in_the_way(ev: _Eval, options: SolveOptions) -> bool:
    """Both the position and the orientation are unmet (a trade-off may be the cause)."""
    angle = ev.orientation_residual
    return (
        ev.residual > options.tolerance
        and angle is not None
        and angle > options.orientation_tolerance
    )


def _better(problem: Problem, old: _Eval, new: _Eval, options: SolveOptions) -> bool:
    """Lexicographic acceptance: the frame tasks first, the secondary tasks after.

    Until the frame tasks are met a step must reduce their error (whatever it does to
    the secondary costs); once they are met it must keep them met and reduce the
    total. A weighted sum alone would settle on a compromise short of the targets.
    """
    if not problem.prioritized:
        return new.merit < old.merit
    if not _primary_met(problem, old, options):
        return new.primary_cost < old.primary_cost
    return _primary_met(problem, new, options) and new.merit < old.merit


def _compromise(old: _Eval, new: _Eval, options: SolveOptions) -> bool:
    """Linear convergence near the targets with an orientation unmet: they trade off.

    Gauss-Newton converges quadratically on consistent targets; an error that only
    halves per step while no error is clamped (and no limit held the step) means an
    unreachable orientation is pulling a position off.
    """
    return (
        new.residual < MAX_POSITION_ERROR
        and _orientation_in_the_way(new, options)
        and new.primary_cost > 0.5 * old.primary_cost
    )


def _relax(problem: Problem) -> Problem | None:
    """The problem with every frame task's orientation weight divided by 10 (None: done)."""
    if all(t.orientation_weight <= 1e-6 * t.position_weight for t in problem.primary):
        return None
    primary = tuple(
        replace(t, orientation_weight=0.1 * t.orientation_weight) for t in problem.primary
    )
    return problem._replace(primary=primary)


def _clear(problem: Problem, before: TreeContext, after: TreeContext) -> bool:
    """The true collision distances after a step respect the margins (see ``step_ok``)."""
    return all(
        limit.step_ok(before, after)
        for limit in problem.limits
        if isinstance(limit, CollisionAvoidance)
    )


def _has_gradient(problem: Problem) -> bool:
    return any(isinstance(t, ManipulabilityTask) for t in problem.secondary)


def _meta(iterations: int, ev: _Eval, status: Status) -> SolveMeta:
    return SolveMeta(iterations, ev.residual, ev.orientation_residual, status)


def _step(
    problem: Problem, ev: _Eval, q: Array, lower: Array, upper: Array, extra: float
) -> tuple[Array, bool]:
    """The step ``dq`` and whether a constraint held the (primary) QP's minimiser.

    The primary QP comes first, then (prioritized) the secondary QP in its null
    space. Held: the QP solver had to activate a bound or a row, so the step is the
    limits', not the tasks' (a velocity limit caps every step of a long move).
    """
    nv = problem.model.nv
    eye = _eye(nv)
    lo, hi, g_mat, h_vec = gather(problem.limits, ev.ctx, lower - q, upper - q)
    if not problem.prioritized:
        a = np.vstack((ev.a1, ev.a2))
        b = np.concatenate((ev.b1, ev.b2))
        h_mat = a.T @ a + (problem.damping + extra + problem.lm_damping * float(b @ b)) * eye
        return _solve(h_mat, -(a.T @ b) - ev.grad, lo, hi, g_mat, h_vec)
    cost1 = float(ev.b1 @ ev.b1)
    h1 = ev.a1.T @ ev.a1 + (problem.damping + extra + problem.lm_damping * cost1) * eye
    dq1, capped = _solve(h1, -(ev.a1.T @ ev.b1), lo, hi, g_mat, h_vec)
    if ev.a2.shape[0] == 0 and not ev.grad.any():
        return dq1, capped
    basis = _null_space(ev.a1, nv)
    if basis.shape[1] == 0:
        return dq1, capped
    return dq1 + basis @ _secondary(problem, ev, dq1, basis, lo, hi, g_mat, h_vec), capped


_EYES: dict[int, Array] = {}


def _eye(n: int) -> Array:
    """A cached identity (never written to)."""
    eye = _EYES.get(n)
    if eye is None:
        eye = _EYES[n] = np.eye(n)
        eye.flags.writeable = False
    return eye


def _solve(
    h_mat: Array, c: Array, lo: Array, hi: Array, g_mat: Array | None, h_vec: Array | None
) -> tuple[Array, bool]:
    """The QP's minimiser (zero when it has none) and whether a constraint held it."""
    if g_mat is None or h_vec is None:
        box = solve_box_qp(h_mat, c, lo, hi)
        return box.x, box.iterations > 0
    result = solve_qp(h_mat, c, g_mat, h_vec, lo, hi)
    if result.status is QPStatus.INFEASIBLE:
        result = solve_qp(h_mat, c, g_mat, np.maximum(h_vec, 0.0), lo, hi)
    if result.status is not QPStatus.OPTIMAL:
        return np.zeros_like(c), True
    return result.x, result.iterations > 0


def _null_space(a1: Array, nv: int) -> Array:
    """Orthonormal basis (nv, r) of the null space of the primary rows."""
    if a1.shape[0] == 0:
        return np.eye(nv)
    _, sigma, vt = np.linalg.svd(a1, full_matrices=True)
    rank = int(np.sum(sigma > _NULL_TOLERANCE * max(float(sigma[0]), 1e-12)))
    basis: Array = vt[rank:].T
    return basis


def _secondary(
    problem: Problem,
    ev: _Eval,
    dq1: Array,
    basis: Array,
    lo: Array,
    hi: Array,
    g_mat: Array | None,
    h_vec: Array | None,
) -> Array:
    """Null-space coordinates ``z``: minimise the secondary cost of ``dq1 + N z``, feasibly."""
    a2n = ev.a2 @ basis
    r = basis.shape[1]
    h_mat = a2n.T @ a2n + problem.secondary_damping * np.eye(r)
    c = a2n.T @ (ev.a2 @ dq1 - ev.b2) - basis.T @ ev.grad
    rows = [basis, -basis]
    rhs = [hi - dq1, dq1 - lo]
    if g_mat is not None and h_vec is not None:
        rows.append(g_mat @ basis)
        rhs.append(h_vec - g_mat @ dq1)
    g_all = np.vstack(rows)
    h_all = np.concatenate(rhs)
    finite = np.isfinite(h_all)
    # dq1 is feasible, so z = 0 is; round-off may leave h a hair below 0.
    h_all = np.maximum(h_all[finite], 0.0)
    result = solve_qp(h_mat, c, g_all[finite], h_all)
    if result.status is not QPStatus.OPTIMAL:
        return np.zeros(r)
    z: Array = result.x
    return z


__all__ = ["Problem", "evaluate", "iterate"]
