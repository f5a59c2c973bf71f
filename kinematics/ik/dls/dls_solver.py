"""Damped least squares (Levenberg-Marquardt) IK: ``DLSSolver`` and the module-level ``solve``.

Each iteration solves ``min |W^½ (J dq - e)|² + λ² |dq - z|²`` where

- ``e`` is the position error and the rotation-vector (or tool-axis) error, each
  clamped per iteration (``position_clamp``, ``orientation_clamp``) so the
  linearisation stays valid far from the target;
- ``W`` weighs orientation rows by ``orientation_weight²`` [m²/rad²];
- ``λ² = μ (damping + ½ |e|²_W)``: error-scaled damping (Sugihara 2011) that
  vanishes near the target (quadratic convergence for tracking) and grows far
  from it or near singularities; ``μ`` grows when a step is rejected. With
  ``svd=True`` the step is computed from the SVD instead and directions whose
  singular value falls below ``singular_threshold`` get extra damping
  (Maciejewski and Klein);
- ``z`` is an optional pull towards a rest pose; it acts in the task's null space.

Limits are handled inside the step by an active set on the per-call box:
coordinates whose step would leave the box are pinned to the bound and the
step is re-solved for the others, so the error is redistributed instead of
clipped away. If that step finds no decrease (pinning coupled joints at once can
leave a step that does not descend, typically when a ``max_delta`` box binds), the
unconstrained step scaled as a whole into the box is tried before giving up. The
whole step vector is then scaled (never per joint) to at most ``max_step``. A step
that does not reduce the weighted error is halved (backtracking, and ``μ`` grows);
if none helps the solve ends ``diverged`` with the last good configuration.
Little progress over ``stall_iterations`` accepted steps ends it ``stalled``.

When a pose target cannot be met, position wins: the weighted solve is polished
by a position-only solve from its result (orientation stays best effort).

On scalar chains (no rest pose, no ``svd``, a position or full-pose target) each
iteration is one generated function per chain (``codegen.fused_step``: FK,
Jacobian, error, damped step and active set as straight-line float code); the
rare cases it does not cover (a rejected step, a rotation error near half a
turn, a matrix that is not positive definite) hand over to the general loop,
which computes the same floats.

``DLSSolver.solve`` keeps the fixed per-call work small for a control loop: a
(robot, source, target) solved before has a ``_Plan`` (names, a generated limits
check, reach, the cached ``_Run`` and fused iteration) found with one dict
lookup, and a call with the previous options, a dict, flat array or joint-state
seed, limits respected and no ``max_delta`` runs on Python floats from it. Any
other call, or anything unusual on the way, takes ``Solver.solve`` from the start.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from hilbot.kinematics.codegen.dls_step import dls_step
from hilbot.kinematics.codegen.fused_step import GENERAL, NEAR_PI, SKIPPED, FusedStep, fused_step
from hilbot.kinematics.ik.core.box import Box
from hilbot.kinematics.ik.core.chain_info import EMPTY as _EMPTY
from hilbot.kinematics.ik.core.chain_info import ChainInfo
from hilbot.kinematics.ik.core.context import (
    Context,
    Evaluation,
    contexts,
    evaluate,
    weighted_cost,
)
from hilbot.kinematics.ik.core.errors import MAX_POSITION
from hilbot.kinematics.ik.core.solution import Solution, SolveMeta, Status
from hilbot.kinematics.ik.core.solver import SolveOptions, Solver
from hilbot.kinematics.ik.core.target import OrientationKind, Target, _parse_transform, parse_target

Array = NDArray[np.float64]
_INF = math.inf
_F64 = np.dtype(np.float64)
# Options for ranking configurations (``task_costs``): nothing is iterated.
_RANK = SolveOptions(1, 1.0, 1.0, False, False, None)


class DLSSolver(Solver):
    """Damped least-squares / Levenberg-Marquardt IK (see the module docstring).

    Args:
        damping: base damping added to ``λ²`` [m²]; keeps steps finite at singularities.
        svd: compute steps by SVD with extra damping of near-singular directions.
        singular_threshold: singular value below which ``svd`` adds damping.
        max_singular_damping: the extra ``λ²`` at a zero singular value.
        orientation_weight: weight of orientation errors against position [m/rad].
        max_step: largest coordinate change per iteration [rad] or [m] (whole-vector scaling).
        position_clamp: largest position error used per iteration [m].
        orientation_clamp: largest orientation error used per iteration [rad].
        rest: joint name -> rest position, pulled in the null space (``None``: off).
        rest_gain: fraction of the distance to the rest pose pulled per iteration.
        max_backtracks: step halvings tried before declaring divergence.
        stall_iterations: accepted steps with little progress before ``stalled``.
        stall_ratio: relative decrease of the weighted error below which a step is "little".

    Raises:
        ValueError: a parameter is out of range.
    """

    def __init__(
        self,
        *,
        damping: float = 1e-6,
        svd: bool = False,
        singular_threshold: float = 0.05,
        max_singular_damping: float = 1e-2,
        orientation_weight: float = 0.25,
        max_step: float = 0.5,
        position_clamp: float = 0.25,
        orientation_clamp: float = 0.75,
        rest: Mapping[str, float] | None = None,
        rest_gain: float = 0.05,
        max_backtracks: int = 4,
        stall_iterations: int = 4,
        stall_ratio: float = 1e-3,
    ) -> None:
        super().__init__()
        _positive(
            damping=damping,
            singular_threshold=singular_threshold,
            max_singular_damping=max_singular_damping,
            orientation_weight=orientation_weight,
            max_step=max_step,
            position_clamp=position_clamp,
            orientation_clamp=orientation_clamp,
            rest_gain=rest_gain,
            stall_ratio=stall_ratio,
        )
        if max_backtracks < 0 or stall_iterations < 1:
            raise ValueError("max_backtracks must be >= 0 and stall_iterations >= 1")
        self.damping = float(damping)
        self.svd = bool(svd)
        self.singular_threshold = float(singular_threshold)
        self.max_singular_damping = float(max_singular_damping)
        self.orientation_weight = float(orientation_weight)
        self.max_step = float(max_step)
        self.position_clamp = float(position_clamp)
        self.orientation_clamp = float(orientation_clamp)
        self.rest = None if rest is None else {str(k): float(v) for k, v in rest.items()}
        self.rest_gain = float(rest_gain)
        self.max_backtracks = int(max_backtracks)
        self.stall_iterations = int(stall_iterations)
        self.stall_ratio = float(stall_ratio)
        self._contexts: dict[int, Context] = {}
        self._rest_vectors: dict[int, list[float | None]] = {}
        self._plans: dict[tuple[int, str, str], _Plan] = {}

    def context(self, chain: Any) -> Context:
        """The cached evaluation context of ``chain``."""
        return contexts(self._contexts, self.info(chain))

    def task_costs(
        self, chain: Any, target: Target, configurations: list[list[float]]
    ) -> list[float]:
        """The weighted squared task error (the cost the iterations reduce) at each configuration.

        Cheap on scalar chains (the fused iteration, stopped before the step): a
        ``MultiStartSolver`` ranks candidate starts with it.
        """
        ctx = self.context(chain)
        w2 = self.orientation_weight**2
        box = self.info(chain).box(np.zeros(ctx.dof), False, None)
        f = _Run(self, ctx, box, _RANK).fused(target)
        if f is None:
            return [weighted_cost(target, ctx.fk(q), w2) for q in configurations]
        point, rot = target.point, target.orientation
        out = []
        for q in configurations:
            position, angle, cost, code, _ = f(q, point, rot, 1.0, -_INF, (), (), 0.0, 0.0)
            if code == NEAR_PI and angle is not None:  # no cost computed; |rotvec| = angle
                cost = position * position + w2 * angle * angle
            out.append(cost)
        return out

    def __setattr__(self, name: str, value: Any) -> None:
        """Set an attribute; changing a setting drops the per-call plans built with it."""
        object.__setattr__(self, name, value)
        plans = self.__dict__.get("_plans")
        if plans and not name.startswith("_"):
            plans.clear()

    def solve(
        self,
        robot: Any,
        state_or_positions: Any,
        source_link: str,
        target_link: str,
        target: object,
        *,
        max_iterations: int = 50,
        tolerance: float = 1e-4,
        orientation_tolerance: float = 0.01,
        strict_orientation: bool = False,
        respect_limits: bool = True,
        initial_positions: Any = None,
        max_delta: float | None = None,
    ) -> Solution:
        """``Solver.solve`` (same arguments, results and errors), with a fast path.

        The common call of a control loop (a chain solved before, a mapping or flat
        array seed, limits respected, no ``max_delta``, the options of the previous
        call) runs on Python lists from a per-chain ``_Plan`` found with one dict
        lookup; anything else, and anything unusual on the way (a seed that is not
        finite or lacks a joint, a target beyond reach, a result outside the box),
        goes through ``Solver.solve`` from the start.
        """
        plan = self._plans.get((id(robot), source_link, target_link))
        if plan is None or plan.robot is not robot:
            self._plan(robot, source_link, target_link)
        elif (
            plan.ctx is not None
            and initial_positions is None
            and max_delta is None
            and respect_limits is True
            and type(max_iterations) is int
        ):
            key = (
                max_iterations,
                tolerance,
                orientation_tolerance,
                strict_orientation,
                True,
                None,
            )
            options = self._options_value
            if key == self._options_key and options is not None:
                solution = self._fast_solve(plan, state_or_positions, target, options)
                if solution is not None:
                    return solution
        return Solver.solve(
            self,
            robot,
            state_or_positions,
            source_link,
            target_link,
            target,
            max_iterations=max_iterations,
            tolerance=tolerance,
            orientation_tolerance=orientation_tolerance,
            strict_orientation=strict_orientation,
            respect_limits=respect_limits,
            initial_positions=initial_positions,
            max_delta=max_delta,
        )

    def _plan(self, robot: Any, source_link: str, target_link: str) -> None:
        """Build the ``_Plan`` of a (robot, source, target) (``ctx`` ``None``: not covered)."""
        try:
            chain = robot.path_between(source_link, target_link)
        except Exception:  # ``Solver.solve`` raises it again, with its data
            return
        info = self.info(chain)
        ctx = None
        if info.dof > 0 and info.scalar:
            ctx = self.context(chain)
            if ctx.kernel is None:
                ctx = None
        self._plans[(id(robot), source_link, target_link)] = _Plan(robot, chain, info, ctx)

    def _fast_solve(
        self, plan: _Plan, value: Any, target: object, options: SolveOptions
    ) -> Solution | None:
        """The fast path of ``solve``; ``None`` hands the call to ``Solver.solve``."""
        info = plan.info
        # The target first, as ``Solver.solve`` does: with two bad arguments, the same error.
        if type(target) is np.ndarray and target.shape == (4, 4) and target.dtype is _F64:
            tgt = _parse_transform(target.tolist(), target)
        else:
            tgt = target if type(target) is Target else parse_target(target)
        if type(value) is dict:
            try:
                q0 = [float(value[name]) for name in plan.names]
            except (KeyError, TypeError, ValueError):
                return None  # the general path raises it
            base: Any = value
        elif type(value) is np.ndarray and value.dtype is _F64 and value.shape == plan.shape:
            q0 = value.tolist()
            base = _EMPTY
        else:  # a joint state, another mapping or array: validated (and raised) by ``read``
            q_read, base = info.read(value)
            q0 = q_read.tolist()
        # One sum: NaN and inf propagate (a finite sum that overflows goes the long way).
        if not math.isfinite(sum(q0)):
            return None
        inside = plan.inside
        if not inside(q0):
            return None  # clipped into the limits by the general path
        x, y, z = tgt.point
        bx, by, bz = plan.base
        distance = math.hypot(x - bx, y - by, z - bz)  # no overflow for huge points
        if distance > plan.reach + options.tolerance:
            return None  # ``Unreachable``
        run = plan.run
        if run is None or run.options is not options:
            assert plan.ctx is not None
            run = plan.run = _Run(self, plan.ctx, info.limits, options)
        kind = tgt.kind
        fused = plan.fused
        f = fused[kind] if kind in fused else fused.setdefault(kind, run.fused(tgt))
        if f is None:
            q, iterations, ev, status = run.solve(q0, tgt)
        else:
            q, iterations, ev, status = run.fast(f, q0, tgt, options.max_iterations)
            if (
                ev.position > options.tolerance
                and kind is OrientationKind.FULL
                and status is not Status.TIMEOUT
            ):
                q, iterations, ev, status = run.polish(q, iterations, ev, status, tgt)
        if not inside(q):
            return None  # never on scalar chains (pinned coordinates are clipped); to be safe
        residual, orientation = ev.position, ev.orientation
        position_reached = residual <= options.tolerance
        reached = position_reached and (
            orientation is None or orientation <= options.orientation_tolerance
        )
        solution = Solution(
            np.array(q),
            iterations,
            residual,
            orientation,
            reached,
            status,
            base,
            info.to_dict,
            position_reached,
        )
        if reached:
            return solution
        return self._failed(solution, np.array(q0), info.limits, options)

    def _solve(
        self, chain: Any, q0: Array, target: Target, box: Box, options: SolveOptions
    ) -> tuple[Array, SolveMeta]:
        ctx = self._contexts.get(id(chain))
        if ctx is None or ctx.chain is not chain or ctx.info is not self._infos.get(id(chain)):
            ctx = self.context(chain)
        run = _Run(self, ctx, box, options)
        q, iterations, ev, status = run.solve(q0.tolist(), target)
        meta = SolveMeta(iterations, ev.position, ev.orientation, status)
        return np.array(q), meta


class _Plan:
    """What ``DLSSolver``'s fast path needs of one (robot, source, target), found by one lookup.

    ``robot`` is held (not just its id) so the id cannot be reused by another robot
    while the plan lives; the solver's per-chain caches hold the chain anyway.
    """

    __slots__ = (
        "base",
        "chain",
        "ctx",
        "fused",
        "info",
        "inside",
        "names",
        "reach",
        "robot",
        "run",
        "shape",
    )

    def __init__(self, robot: Any, chain: Any, info: ChainInfo, ctx: Context | None) -> None:
        self.robot = robot
        self.chain = chain
        self.info = info
        self.ctx = ctx
        self.names = info.names
        self.shape = (info.dof,)
        # Coordinates beyond MAX_POSITION (unbounded joints too) take the general path,
        # which raises ``InvalidPositions`` for them.
        self.inside = _inside(
            [max(x, -MAX_POSITION) for x in info.lower_list],
            [min(x, MAX_POSITION) for x in info.upper_list],
        )
        base = info.base_origin.tolist()
        self.base: tuple[float, float, float] = (base[0], base[1], base[2])
        self.reach = info.reach
        # The last options' ``_Run`` on the limits box (it keeps no per-solve state).
        self.run: _Run | None = None
        # The fused iteration per orientation kind (``None``: the general loop).
        self.fused: dict[OrientationKind, FusedStep | None] = {}


def _inside(lower: list[float], upper: list[float]) -> Callable[[list[float]], bool]:
    """``q -> lower <= q <= upper`` for every coordinate (``False`` for NaN), as one function.

    Chained comparisons on the bounds baked in as defaults: a third of the cost of
    ``all(map(operator.le, ...))`` twice for a handful of joints.
    """
    n = len(lower)
    args = ", ".join(f"l{i}=lower[{i}], u{i}=upper[{i}]" for i in range(n))
    test = " and ".join(f"l{i} <= q[{i}] <= u{i}" for i in range(n)) or "True"
    namespace: dict[str, Any] = {"lower": lower, "upper": upper}
    exec(f"def inside(q, {args}):\n    return {test}\n", namespace)
    inside: Callable[[list[float]], bool] = namespace["inside"]
    return inside


class _Run:
    """The state shared by the iterations of one solve."""

    __slots__ = ("bounded", "ctx", "hi", "keep", "lo", "options", "rest", "solver", "stall")

    def __init__(self, solver: DLSSolver, ctx: Context, box: Box, options: SolveOptions) -> None:
        self.solver = solver
        self.ctx = ctx
        self.options = options
        self.lo: list[float] = box.lower_list
        self.hi: list[float] = box.upper_list
        self.bounded = box.bounded
        self.rest = None if solver.rest is None else _rest_vector(solver, ctx)
        stall = options.stall or (solver.stall_iterations, solver.stall_ratio)
        self.stall = stall[0]
        self.keep = 1.0 - stall[1]  # a step keeping more of the cost made little progress

    def solve(self, q: list[float], target: Target) -> tuple[list[float], int, Evaluation, Status]:
        """``DLSSolver._solve`` on lists: iterate from ``q``, polish an unmet pose's position."""
        options = self.options
        q, iterations, ev, status = self.iterate(q, target, options.max_iterations)
        if target.rows == 6 and ev.position > options.tolerance and status is not Status.TIMEOUT:
            return self.polish(q, iterations, ev, status, target)
        return q, iterations, ev, status

    def polish(
        self, q: list[float], iterations: int, ev: Evaluation, status: Status, target: Target
    ) -> tuple[list[float], int, Evaluation, Status]:
        """Position wins: polish an unmet pose's position alone, starting from the compromise.

        Skipped for intermediate attempts (``options.polish`` false), when a
        ``max_delta`` bound, not the chain, stopped the solve, and when the weighted
        solve used up the budget: the polish gets only the iterations left of
        ``max_iterations``, so a solve never runs past it.
        """
        options = self.options
        budget = options.max_iterations - iterations
        if not options.polish or budget <= 0 or self.on_delta_bound(q):
            return q, iterations, ev, status
        point = Target(target.point)
        q2, more, ev2, status2 = self.iterate(q, point, budget)
        if ev2.position < ev.position:
            full = evaluate(target, self.ctx.fk(q2), [])
            q, iterations, ev = q2, iterations + more, full
            status = Status.STALLED if status2 is Status.CONVERGED else status2
        return q, iterations, ev, status

    def iterate(
        self, q: list[float], task: Target, max_iterations: int
    ) -> tuple[list[float], int, Evaluation, Status]:
        """Iterate from ``q``; return the last good configuration and how it ended."""
        fused = self.fused(task)
        if fused is None:
            return self.general(q, task, max_iterations, 0, 1.0, 0, None)
        return self.fast(fused, q, task, max_iterations)

    def fused(self, task: Target) -> FusedStep | None:
        """The chain's fused iteration for ``task``, or ``None`` where it does not apply."""
        s, ctx = self.solver, self.ctx
        kind = task.kind
        if ctx.kernel is None or s.svd or self.rest is not None or kind is OrientationKind.AXIS:
            return None
        rows = 3 if kind is OrientationKind.NONE else 6
        key = (
            rows,
            self.bounded,
            s.damping,
            s.orientation_weight,
            s.position_clamp,
            s.orientation_clamp,
            s.max_step,
        )
        f = ctx.fused.get(key)
        if f is None:
            f = ctx.fused[key] = fused_step(
                ctx.kernel,
                rows,
                damping=s.damping,
                weight=s.orientation_weight,
                position_clamp=s.position_clamp,
                orientation_clamp=s.orientation_clamp,
                max_step=s.max_step,
                bounded=self.bounded,
            )
        return f

    def fast(
        self, f: FusedStep, q: list[float], task: Target, max_iterations: int
    ) -> tuple[list[float], int, Evaluation, Status]:
        """``general`` on the fused iteration, for as long as plain steps are accepted.

        Anything else (the box binds, a step is rejected, the matrix is not positive
        definite, a rotation error near half a turn) hands the state over to
        ``general``, which redoes that iteration: both compute the same floats.
        """
        options = self.options
        tol, otol = options.tolerance, options.orientation_tolerance
        stall_iterations, keep = self.stall, self.keep
        point, rot, lo, hi = task.point, task.orientation, self.lo, self.hi
        mu, stall, it = 1.0, 0, 0
        position, angle, cost, code, payload = f(q, point, rot, mu, _INF, lo, hi, tol, otol)
        while True:
            if code == NEAR_PI:
                return self.general(q, task, max_iterations, it, mu, stall, None)
            if position <= tol and (angle is None or angle <= otol):
                return q, it, _tuple_new(Evaluation, ([], [], position, angle)), Status.CONVERGED
            if stall >= stall_iterations:
                return q, it, _tuple_new(Evaluation, ([], [], position, angle)), Status.STALLED
            if it >= max_iterations:
                return q, it, _tuple_new(Evaluation, ([], [], position, angle)), Status.TIMEOUT
            if code == GENERAL:
                ev = Evaluation(payload[0], payload[1], position, angle)
                return self.general(q, task, max_iterations, it, mu, stall, ev)
            if code == SKIPPED:  # a limit skipped a step that is needed after all
                if not cost < _INF:  # an error too large to square: no limit lets it step
                    return self.general(q, task, max_iterations, it, mu, stall, None)
                position, angle, cost, code, payload = f(q, point, rot, mu, _INF, lo, hi, tol, otol)
                continue
            it += 1
            mu_next = max(1.0, 0.5 * mu)
            # The next step is wasted unless this one is accepted and the loop goes on.
            if it >= max_iterations:
                limit = -_INF
            elif stall + 1 >= stall_iterations:
                limit = cost * keep
            else:
                limit = cost
            pn, an, cn, cn_code, pay_n = f(payload, point, rot, mu_next, limit, lo, hi, tol, otol)
            if cn_code == NEAR_PI or not cn < cost:
                return self.general(q, task, max_iterations, it - 1, mu, stall, None)
            stall = stall + 1 if cn > cost * keep else 0
            mu, q = mu_next, payload
            position, angle, cost, code, payload = pn, an, cn, cn_code, pay_n

    def general(
        self,
        q: list[float],
        task: Target,
        max_iterations: int,
        it: int,
        mu: float,
        stall: int,
        ev: Evaluation | None,
    ) -> tuple[list[float], int, Evaluation, Status]:
        """Iterate from ``q`` (with ``ev`` there, if known) after ``it`` iterations."""
        s, ctx = self.solver, self.ctx
        tol, otol = self.options.tolerance, self.options.orientation_tolerance
        w = s.orientation_weight
        w2 = w * w
        step = dls_step(task.rows, ctx.dof, preferred=self.rest is not None)
        if ev is None:
            pose, cols = ctx.fk_jacobian(q)
            ev = evaluate(task, pose, cols)
        cost = _cost(ev.error, w2)
        stall_iterations, stall_ratio = self.options.stall or (s.stall_iterations, s.stall_ratio)
        while True:
            if ev.position <= tol and (ev.orientation is None or ev.orientation <= otol):
                return q, it, ev, Status.CONVERGED
            if stall >= stall_iterations:
                return q, it, ev, Status.STALLED
            if it >= max_iterations:
                return q, it, ev, Status.TIMEOUT
            it += 1
            e = _clamp(ev.error, s.position_clamp, s.orientation_clamp)
            lam2 = mu * (s.damping + 0.5 * _cost(e, w2))
            damped = _Damped(step, ev.columns, e, lam2, w, task.rows)
            pinned: list[int] = []
            try:
                dq = self.step(damped, q, pinned)
            except ArithmeticError:
                mu *= 10.0
                continue
            biggest = max(map(abs, dq))
            if biggest < 1e-14:
                return q, it, ev, Status.STALLED
            if biggest > s.max_step:
                k = s.max_step / biggest
                dq = [d * k for d in dq]
            found = False
            for _ in range(s.max_backtracks + 1):
                qn = self.clip(ctx.integrate(q, dq), pinned)
                pose, cols = ctx.fk_jacobian(qn)
                evn = evaluate(task, pose, cols)
                costn = _cost(evn.error, w2)
                if costn < cost:
                    found = True
                    break
                dq = [0.5 * d for d in dq]
                mu *= 4.0
            if not found and pinned:
                # Pinning several coordinates at once can leave a step that no longer
                # descends (coupled joints pinned in the unconstrained step's signs). The
                # unconstrained step scaled as a whole into the box always descends.
                scaled = self.scaled_step(damped, q)
                for _ in range(s.max_backtracks + 1):
                    if not scaled:
                        break
                    qn = self.clip(ctx.integrate(q, scaled), list(range(len(q))))
                    pose, cols = ctx.fk_jacobian(qn)
                    evn = evaluate(task, pose, cols)
                    costn = _cost(evn.error, w2)
                    if costn < cost:
                        found = True
                        break
                    scaled = [0.5 * d for d in scaled]
            if not found:
                return q, it, ev, Status.DIVERGED
            stall = stall + 1 if costn > cost * (1.0 - stall_ratio) else 0
            mu = max(1.0, 0.5 * mu)
            q, ev, cost = qn, evn, costn

    def step(self, damped: _Damped, q: list[float], pinned: list[int]) -> list[float]:
        """One damped step with the box handled by an active set (pin and re-solve).

        The coordinates pinned to a bound are appended to ``pinned``.
        """
        dq, z = self.full_step(damped, q)
        if not self.bounded:
            return dq
        lo, hi = self.lo, self.hi
        cols, rows = damped.cols, damped.rows
        n = len(dq)
        violated = [i for i in range(n) if not lo[i] <= q[i] + dq[i] <= hi[i]]
        free = list(range(n))
        r = list(damped.e)
        while violated:
            for i in violated:
                d = (hi[i] if q[i] + dq[i] > hi[i] else lo[i]) - q[i]
                dq[i] = d
                c = cols[i]
                for k in range(rows):
                    r[k] -= c[k] * d
                free.remove(i)
                pinned.append(i)
            if not free:
                break
            self.free_step(damped, r, z, free, dq)
            violated = [i for i in free if not lo[i] <= q[i] + dq[i] <= hi[i]]
        return dq

    def scaled_step(self, damped: _Damped, q: list[float]) -> list[float]:
        """The damped step scaled as a whole to stay in the box (empty if it cannot move).

        Coordinates on a bound that the step pushes outwards are held (and the step
        re-solved for the others) first, so the scale is not zero because of them.
        """
        try:
            dq, z = self.full_step(damped, q)
            lo, hi = self.lo, self.hi
            n = len(dq)
            held = [
                i
                for i in range(n)
                if (q[i] >= hi[i] and dq[i] > 0.0) or (q[i] <= lo[i] and dq[i] < 0.0)
            ]
            if held:
                free = [i for i in range(n) if i not in held]
                if not free:
                    return []
                dq = [0.0] * n
                self.free_step(damped, damped.e, z, free, dq)
        except ArithmeticError:
            return []
        scale = 1.0
        for i in range(n):
            if dq[i] > 0.0 and q[i] + dq[i] > hi[i]:
                scale = min(scale, (hi[i] - q[i]) / dq[i])
            elif dq[i] < 0.0 and q[i] + dq[i] < lo[i]:
                scale = min(scale, (lo[i] - q[i]) / dq[i])
        scale = min(scale, self.solver.max_step / max(max(map(abs, dq)), 1e-300))
        if not scale > 0.0:
            return []
        return [d * scale for d in dq]

    def full_step(self, damped: _Damped, q: list[float]) -> tuple[list[float], list[float]]:
        """The damped step of every coordinate (the box ignored), and the pull ``z`` it used."""
        z = self.preferred(q)
        solve = self.svd_step if self.solver.svd else damped.step
        dq: list[float] = solve(damped.cols, damped.e, damped.lam2, damped.w, z)
        return dq, z

    def free_step(
        self, damped: _Damped, e: list[float], z: list[float], free: list[int], dq: list[float]
    ) -> None:
        """Re-solve the step for the ``free`` coordinates alone, towards error ``e``, into ``dq``.

        The other coordinates keep their values in ``dq`` (pinned or held).
        """
        sub_step = dls_step(damped.rows, len(free), preferred=True)
        sub_solve = self.svd_step if self.solver.svd else sub_step
        sub = sub_solve(
            [damped.cols[i] for i in free], e, damped.lam2, damped.w, [z[i] for i in free]
        )
        for k, i in enumerate(free):
            dq[i] = sub[k]

    def preferred(self, q: list[float]) -> list[float]:
        """The rest-pose pull ``z`` (zeros without a rest pose)."""
        if self.rest is None:
            return [0.0] * len(q)
        g = self.solver.rest_gain
        return [0.0 if r is None else g * (r - x) for r, x in zip(self.rest, q, strict=True)]

    def svd_step(
        self, cols: list[list[float]], e: list[float], lam2: float, w: float, z: list[float]
    ) -> list[float]:
        """The step from an SVD, damping near-singular directions more."""
        s = self.solver
        rows = len(e)
        jac = np.array(cols, dtype=np.float64).T[:rows]
        weights = np.ones(rows)
        weights[3:] = w
        jac *= weights[:, None]
        zz = np.array(z)
        r = np.array(e) * weights - jac @ zz
        u, sigma, vt = np.linalg.svd(jac, full_matrices=False)
        extra = np.where(
            sigma < s.singular_threshold,
            (1.0 - (sigma / s.singular_threshold) ** 2) * s.max_singular_damping,
            0.0,
        )
        gain = sigma / (sigma * sigma + lam2 + extra)
        return list((zz + vt.T @ (gain * (u.T @ r))).tolist())

    def on_delta_bound(self, q: list[float]) -> bool:
        """Whether a coordinate sits on a ``max_delta`` bound (one that is not a joint limit).

        Then the call's budget, not the chain, stopped the solve: the next call continues.
        """
        if self.options.max_delta is None:
            return False
        lower, upper = self.ctx.info.lower_list, self.ctx.info.upper_list
        for x, a, b, la, ub in zip(q, self.lo, self.hi, lower, upper, strict=True):
            if (x <= a + 1e-12 and a > la) or (x >= b - 1e-12 and b < ub):
                return True
        return False

    def clip(self, q: list[float], pinned: list[int]) -> list[float]:
        """``q`` clipped into the box against rounding.

        On scalar chains only pinned coordinates can land (an ulp) outside: free ones
        were checked inside the box, and scaling a step keeps it between ``q`` and ``q + dq``.
        """
        if not self.bounded:
            return q
        lo, hi = self.lo, self.hi
        if self.ctx.scalar:
            for i in pinned:
                q[i] = min(max(q[i], lo[i]), hi[i])
            return q
        return [min(max(x, a), b) for x, a, b in zip(q, lo, hi, strict=True)]


class _Damped(NamedTuple):
    """One iteration's damped problem ``min |W^½ (J dq - e)|² + λ² |dq - z|²`` (``z``: the pull)."""

    step: Any  # the generated ``dls_step`` for every coordinate
    cols: list[list[float]]  # the Jacobian's columns
    e: list[float]  # the clamped task error
    lam2: float  # λ²
    w: float  # orientation weight [m/rad]
    rows: int  # task rows, 3 or 6


# ``Evaluation(...)`` without the Python-level ``NamedTuple.__new__`` (hot path).
_tuple_new = tuple.__new__


def _cost(e: list[float], w2: float) -> float:
    p = e[0] * e[0] + e[1] * e[1] + e[2] * e[2]
    if len(e) == 3:
        return p
    return p + w2 * (e[3] * e[3] + e[4] * e[4] + e[5] * e[5])


def _clamp(e: list[float], position: float, orientation: float) -> list[float]:
    # The fused iteration computes the same expressions: keep them alike (same floats).
    p = math.sqrt(e[0] * e[0] + e[1] * e[1] + e[2] * e[2])
    o = math.sqrt(e[3] * e[3] + e[4] * e[4] + e[5] * e[5]) if len(e) == 6 else 0.0
    if p <= position and o <= orientation:
        return e
    kp = position / p if p > position else 1.0
    out = [e[0] * kp, e[1] * kp, e[2] * kp]
    if len(e) == 6:
        ko = orientation / o if o > orientation else 1.0
        out += [e[3] * ko, e[4] * ko, e[5] * ko]
    return out


def _rest_vector(solver: DLSSolver, ctx: Context) -> list[float | None] | None:
    if solver.rest is None:
        return None
    key = id(ctx)
    vector = solver._rest_vectors.get(key)
    if vector is None:
        rest = solver.rest
        vector = [rest.get(name) for name in ctx.info.names]
        solver._rest_vectors[key] = vector
    return vector


def _positive(**values: float) -> None:
    for name, value in values.items():
        if not (value > 0.0 and math.isfinite(value)):
            raise ValueError(f"{name} must be a finite positive number, got {value!r}")


_SHARED = DLSSolver()

# ``DLSSolver().solve(...)`` on one shared solver (see ``Solver.solve``): its bound
# method, so a call pays no forwarding layer and the arguments are written once.
solve = _SHARED.solve
