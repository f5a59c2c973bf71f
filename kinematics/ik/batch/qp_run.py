"""The ``QPSolver`` iteration on a batch axis: B worlds, one chain, per-world state.

Rule for rule it is ``QPSolver._solve``: the same weighted rows and clamps, the
same Hessian ``A'A + (damping + extra + lm_damping |b|^2) I``, the same limits, the
same line search (the first of ``dq, dq/2, dq/4, dq/8`` that lowers the true cost
and keeps collision margins), the same Levenberg-Marquardt damping after a
rejected step, the same position-wins rule and stall tests. Each world keeps its
own damping, orientation weight, status and iteration count; an iteration works
only on the worlds still running. The QP of every world is solved exactly (box
path: ``qp_box``; a world whose box step breaks a general row: the dense
Goldfarb-Idnani solver, as the single-world path), so each world's answer is the
single solver's to rounding.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from hilbot.kinematics.ik.batch.fk import Kernel
from hilbot.kinematics.ik.batch.qp_box import BoxBatch, solve_box_batch
from hilbot.kinematics.ik.batch.qp_dense import solve_qp_batch
from hilbot.kinematics.ik.batch.qp_limits import BatchConstraints, gather_batch
from hilbot.kinematics.ik.batch.qp_rows import Rows, Targets, task_rows_batch
from hilbot.kinematics.ik.batch.results import STATUSES
from hilbot.kinematics.ik.core.solver import SolveOptions
from hilbot.kinematics.ik.qp.limits.collision_avoidance import CollisionAvoidance
from hilbot.kinematics.ik.qp.limits.limit import Limit
from hilbot.kinematics.ik.qp.qp_solver import ChainContext

Array = NDArray[np.float64]
Ints = NDArray[np.int64]
Mask = NDArray[np.bool_]
_RUNNING = -1
_CONVERGED, _STALLED, _DIVERGED, _TIMEOUT = range(4)
_BACKTRACKS = 4
_MAX_EXTRA_DAMPING = 1.0
_SLOW_RATIO = 0.9
_QP_OPTIMAL, _QP_INFEASIBLE = 0, 1  # qp_dense status codes


class Settings(NamedTuple):
    """The ``QPSolver`` parameters a run needs."""

    limits: tuple[Limit, ...]
    position_weight: float
    orientation_weight: float
    damping: float
    lm_damping: float


class Outcome(NamedTuple):
    """Per world: q (B, n), residual (B,), angle (B,) (NaN: none), status codes, iterations."""

    q: Array
    residual: Array
    angle: Array
    status: Ints
    iterations: Ints


class _Points:
    """The task evaluated at the configurations of some worlds."""

    __slots__ = ("a", "angle", "b", "jac", "pose", "q", "residual")

    def __init__(self, q: Array, pose: Array, jac: Array, rows: Rows) -> None:
        self.q, self.pose, self.jac = q, pose, jac
        self.a, self.b, self.residual, self.angle = rows

    def take(self, idx: NDArray[np.intp]) -> _Points:
        return _Points(
            self.q[idx], self.pose[idx], self.jac[idx],
            Rows(self.a[idx], self.b[idx], self.residual[idx], self.angle[idx]),
        )  # fmt: skip

    def put(self, idx: NDArray[np.intp], other: _Points) -> None:
        for name in self.__slots__:
            getattr(self, name)[idx] = getattr(other, name)


class BatchQPRun:
    """One batched solve of B targets on one chain (see the module docstring)."""

    def __init__(
        self,
        settings: Settings,
        chain: Any,
        names: tuple[str, ...],
        scalar: bool,
        kernel: Kernel | None,
        options: SolveOptions,
    ) -> None:
        self.s = settings
        self.chain = chain
        self.names = names
        self.scalar = scalar
        self.kernel = kernel
        self.options = options
        self.collision = tuple(
            lim for lim in settings.limits if isinstance(lim, CollisionAvoidance)
        )

    # --- evaluation -------------------------------------------------------------------------

    def fk(self, q: Array) -> tuple[Array, Array]:
        """Poses (B, 3, 4) and Jacobians (B, 6, n) at ``q`` (B, n)."""
        if self.kernel is not None:
            return self.kernel(q)
        poses, jac = self.chain.fk_jacobian_batch(q)
        return poses, jac

    def evaluate(self, q: Array, targets: Targets, wo: Array) -> _Points:
        """The task at ``q`` (B, n): poses, Jacobians, weighted rows and residuals."""
        pose, jac = self.fk(q)
        return _Points(
            q, pose, jac, task_rows_batch(pose, jac, targets, self.s.position_weight, wo)
        )

    def integrate(self, q: Array, dq: Array) -> Array:
        """``q + dq`` (the chain's own integration for planar or floating joints)."""
        if self.scalar:
            return q + dq
        return np.array([self.chain.integrate(q[b], dq[b]) for b in range(q.shape[0])])

    def cost(self, residual: Array, angle: Array, wo: Array) -> Array:
        """``qp._true_cost`` per world (NaN angles count as none)."""
        cost = (self.s.position_weight * residual) ** 2
        return np.where(np.isnan(angle), cost, cost + (wo * np.nan_to_num(angle)) ** 2)

    def done(self, residual: Array, angle: Array) -> Mask:
        """``qp._done`` per world: position and (if any) orientation within tolerance."""
        ok = residual <= self.options.tolerance
        return ok & (np.isnan(angle) | (angle <= self.options.orientation_tolerance))

    # --- the step ---------------------------------------------------------------------------

    def step(
        self,
        pts: _Points,
        extra: Array,
        lower: Array,
        upper: Array,
        guess: tuple[NDArray[np.bool_], NDArray[np.bool_]] | None = None,
    ) -> tuple[Array, Mask, list[ChainContext] | None, BoxBatch | None]:
        """QP steps ``dq`` (B, n), whether a constraint held each (B,), contexts, box solve.

        The box solve's held bounds start the next iteration's active sets.
        """
        a, b = pts.a, pts.b
        n = a.shape[2]
        at = a.transpose(0, 2, 1)
        h_mat = at @ a
        bb = (b[:, None, :] @ b[:, :, None])[:, 0, 0]  # b @ b, as the scalar code sums it
        diag = self.s.damping + extra + self.s.lm_damping * bb
        h_mat[:, np.arange(n), np.arange(n)] += diag[:, None]
        c = -(at @ b[:, :, None])[:, :, 0]
        q = pts.q
        contexts = None
        if self.collision or any(not _vectorised(lim) for lim in self.s.limits):
            contexts = [ChainContext(self.chain, q[k], self.names) for k in range(q.shape[0])]
        cons = gather_batch(
            self.s.limits, self.chain, self.names, q, lower - q, upper - q, contexts
        )
        if cons.g is None:
            box = solve_box_batch(h_mat, c, cons.lower, cons.upper, guess)
            return box.x, box.capped, contexts, box
        return (*general_steps(h_mat, c, cons), contexts, None)

    # --- the loop ---------------------------------------------------------------------------

    def solve(self, q0: Array, targets: Targets, lower: Array, upper: Array) -> Outcome:
        """Iterate from the seeds ``q0`` (B, n) inside the call boxes ``[lower, upper]``."""
        size = q0.shape[0]
        opts = self.options
        wo = np.full(size, self.s.orientation_weight)
        pts = self.evaluate(q0.copy(), targets, wo)
        extra = np.zeros(size)
        status = np.full(size, _RUNNING, dtype=np.int64)
        its = np.zeros(size, dtype=np.int64)
        self.held_lo = np.zeros(q0.shape, dtype=bool)
        self.held_hi = np.zeros(q0.shape, dtype=bool)
        live = np.arange(size)
        for iteration in range(1, opts.max_iterations + 1):
            done = self.done(pts.residual[live], pts.angle[live])
            if done.any():
                status[live[done]] = _CONVERGED
                its[live[done]] = iteration - 1
                live = live[~done]
            if not live.size:
                break
            its[live] = iteration
            live = self._iterate(live, pts, q0, targets, lower, upper, extra, wo, status)
            if not live.size:
                break
        if live.size:
            done = self.done(pts.residual[live], pts.angle[live])
            status[live] = np.where(done, _CONVERGED, _TIMEOUT)
            its[live] = opts.max_iterations
        return Outcome(pts.q, pts.residual, pts.angle, status, its)

    def _iterate(
        self,
        live: NDArray[np.intp],
        pts: _Points,
        q0: Array,
        targets: Targets,
        lower: Array,
        upper: Array,
        extra: Array,
        wo: Array,
        status: Ints,
    ) -> NDArray[np.intp]:
        """One iteration on the worlds ``live``; returns those still running."""
        cur = pts.take(live)
        sub = _take(targets, live)
        guess = (self.held_lo[live], self.held_hi[live])
        dq, capped, contexts, box = self.step(cur, extra[live], lower[live], upper[live], guess)
        if box is not None:
            self.held_lo[live], self.held_hi[live] = box.lower, box.upper
        new, accepted = self._line_search(cur, dq, sub, wo[live], contexts)
        boxed = _at_delta(cur.q, q0[live], self.options.max_delta)
        keep = np.ones(live.size, dtype=bool)
        # Rejected steps.
        rej = ~accepted
        stop = rej & boxed
        status[live[stop]] = _STALLED
        keep &= ~stop
        rest = rej & ~boxed
        w = live[rest]
        more = extra[w] < _MAX_EXTRA_DAMPING
        extra[w[more]] = np.maximum(1e-4, 10.0 * extra[w[more]])
        lost = np.flatnonzero(rest)[~more]
        if lost.size:
            stuck = self._stuck(lost, live, cur, wo)
            if stuck.any():
                self._reweight(live[lost[stuck]], pts, targets, wo)
                extra[live[lost[stuck]]] = 0.0
            fail = lost[~stuck]
            status[live[fail]] = _failure(cur.take(fail), dq[fail])
            keep[fail] = False
        # Accepted steps.
        ok = np.flatnonzero(accepted)
        if ok.size:
            self._accept(ok, live, cur, new, boxed, capped, extra, wo, pts, targets, status, keep)
        return live[keep]

    def _accept(
        self,
        ok: NDArray[np.intp],
        live: NDArray[np.intp],
        cur: _Points,
        new: _Points,
        boxed: Mask,
        capped: Mask,
        extra: Array,
        wo: Array,
        pts: _Points,
        targets: Targets,
        status: Ints,
        keep: Mask,
    ) -> None:
        w = live[ok]
        e = extra[w]
        extra[w] = np.where(e > 1e-6, 0.1 * e, 0.0)
        cost_old = self.cost(cur.residual[ok], cur.angle[ok], wo[w])
        nxt = new.take(ok)
        cost_new = self.cost(nxt.residual, nxt.angle, wo[w])
        pts.put(w, nxt)
        slow_box = boxed[ok] & (cost_new > _SLOW_RATIO * cost_old)
        status[w[slow_box]] = _STALLED
        keep[ok[slow_box]] = False
        tiny = (cost_old - cost_new < 1e-14) & ~self.done(nxt.residual, nxt.angle)
        slow = ~capped[ok] & (nxt.residual < 0.2) & (cost_new > 0.5 * cost_old)
        ask = ~slow_box & (tiny | slow)
        stuck = np.zeros(ok.size, dtype=bool)
        if ask.any():
            idx = np.flatnonzero(ask)
            stuck[idx] = self._stuck_values(nxt.residual[idx], nxt.angle[idx], wo, w[idx])
            if stuck.any():
                self._reweight(w[stuck], pts, targets, wo)
        end = ~slow_box & tiny & ~stuck
        status[w[end]] = _STALLED
        keep[ok[end]] = False

    def _stuck(
        self, lost: NDArray[np.intp], live: NDArray[np.intp], cur: _Points, wo: Array
    ) -> Mask:
        return self._stuck_values(cur.residual[lost], cur.angle[lost], wo, live[lost])

    def _stuck_values(
        self, residual: Array, angle: Array, wo: Array, worlds: NDArray[np.intp]
    ) -> Mask:
        """``qp._stuck_on_orientation`` per world: relax (x 0.1) the orientation weight where so."""
        opts = self.options
        stuck = ~np.isnan(angle) & (residual > opts.tolerance)
        stuck &= np.nan_to_num(angle) > opts.orientation_tolerance
        stuck &= wo[worlds] >= 1e-6 * self.s.position_weight
        wo[worlds[stuck]] *= 0.1
        return stuck

    def _reweight(
        self, worlds: NDArray[np.intp], pts: _Points, targets: Targets, wo: Array
    ) -> None:
        """``qp._evaluate_rows``: the same configurations with the rows re-weighted."""
        rows = task_rows_batch(
            pts.pose[worlds], pts.jac[worlds], _take(targets, worlds),
            self.s.position_weight, wo[worlds],
        )  # fmt: skip
        pts.a[worlds], pts.b[worlds], pts.residual[worlds], pts.angle[worlds] = rows

    def _line_search(
        self,
        cur: _Points,
        dq: Array,
        targets: Targets,
        wo: Array,
        contexts: list[ChainContext] | None,
    ) -> tuple[_Points, Mask]:
        """The first of ``dq, dq/2, ...`` that lowers each world's cost and keeps margins."""
        cost = self.cost(cur.residual, cur.angle, wo)
        new = _Points(
            cur.q.copy(),
            cur.pose.copy(),
            cur.jac.copy(),
            Rows(cur.a.copy(), cur.b.copy(), cur.residual.copy(), cur.angle.copy()),
        )
        accepted = np.zeros(cur.q.shape[0], dtype=bool)
        todo = np.arange(cur.q.shape[0])
        step = 1.0
        for _ in range(_BACKTRACKS):
            trial = self.evaluate(
                self.integrate(cur.q[todo], step * dq[todo]), _take(targets, todo), wo[todo]
            )
            ok = self.cost(trial.residual, trial.angle, wo[todo]) < cost[todo]
            if self.collision and contexts is not None:
                ok &= self._clear(todo, trial.q, contexts)
            if ok.any():
                new.put(todo[ok], trial.take(np.flatnonzero(ok)))
                accepted[todo[ok]] = True
                todo = todo[~ok]
            if not todo.size:
                break
            step *= 0.5
        return new, accepted

    def _clear(self, todo: NDArray[np.intp], q: Array, contexts: list[ChainContext]) -> Mask:
        """``qp._clear`` per world: the true distances after the step respect the margins."""
        ok = np.ones(todo.size, dtype=bool)
        for k, b in enumerate(todo):
            after = ChainContext(self.chain, q[k], self.names)
            ok[k] = all(lim.step_ok(contexts[b], after) for lim in self.collision)
        return ok


def _vectorised(limit: Limit) -> bool:
    from hilbot.kinematics.ik.qp.limits.configuration_limit import ConfigurationLimit
    from hilbot.kinematics.ik.qp.limits.linear_inequality import LinearInequality
    from hilbot.kinematics.ik.qp.limits.velocity_limit import VelocityLimit

    return type(limit) in (ConfigurationLimit, VelocityLimit, LinearInequality)


def general_steps(h_mat: Array, c: Array, cons: BatchConstraints) -> tuple[Array, Mask]:
    """``qp_step.solve_step`` per world: the box path without rows, the general path with.

    The dense dual active set (``qp_dense``) solves each world with rows exactly
    as ``dense.solve_qp`` does; rows that cannot be met together with the box are
    relaxed to ``h := max(h, 0)`` and solved again, and a world whose QP still fails
    does not move (``dq = 0``), as in ``solve_step``. Whether a constraint held the
    step is the scalar solver's: it needed an active-set iteration.
    """
    assert cons.g is not None and cons.h is not None and cons.rows is not None
    x = np.empty(c.shape)
    capped = np.empty(c.shape[0], dtype=bool)
    plain = np.flatnonzero(cons.rows == 0)  # e.g. no collision pair near in this world
    if plain.size:
        box = solve_box_batch(h_mat[plain], c[plain], cons.lower[plain], cons.upper[plain])
        x[plain], capped[plain] = box.x, box.capped
    w = np.flatnonzero(cons.rows > 0)
    if not w.size:
        return x, capped
    g, h, rows = cons.g[w], cons.h[w], cons.rows[w]
    lo, hi = cons.lower[w], cons.upper[w]
    out = solve_qp_batch(h_mat[w], c[w], g, h, rows, lo, hi)
    dq, status, its = out.x, out.status, out.iterations
    again = np.flatnonzero(status == _QP_INFEASIBLE)
    if again.size:
        retry = solve_qp_batch(
            h_mat[w[again]], c[w[again]], g[again], np.maximum(h[again], 0.0), rows[again],
            lo[again], hi[again],
        )  # fmt: skip
        dq[again], status[again], its[again] = retry
    dq[status != _QP_OPTIMAL] = 0.0
    x[w] = dq
    capped[w] = its > 0
    return x, capped


def _failure(pts: _Points, dq: Array) -> Ints:
    """``qp._failure`` per world: stalled when the model predicted (almost) no gain."""
    cost = (pts.b[:, None, :] @ pts.b[:, :, None])[:, 0, 0]
    r = (pts.a @ dq[:, :, None])[:, :, 0] - pts.b
    predicted = cost - (r[:, None, :] @ r[:, :, None])[:, 0, 0]
    return np.where(predicted <= 1e-6 * cost, _STALLED, _DIVERGED).astype(np.int64)


def _at_delta(q: Array, q0: Array, max_delta: float | None) -> Mask:
    if max_delta is None:
        return np.zeros(q.shape[0], dtype=bool)
    at: Mask = np.abs(q - q0).max(axis=1) >= max_delta * (1.0 - 1e-9)
    return at


def _take(targets: Targets, idx: NDArray[np.intp]) -> Targets:
    orientation = None if targets.orientation is None else targets.orientation[idx]
    return Targets(targets.kind, targets.point[idx], orientation)


__all__ = ["STATUSES", "BatchQPRun", "Outcome", "Settings"]
