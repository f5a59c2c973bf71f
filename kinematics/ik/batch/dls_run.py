"""The vectorised DLS iteration behind ``BatchSolver`` (one batch axis, per-item state).

It mirrors ``DLSSolver``'s loop rule for rule (clamped errors, error-scaled damping,
active set on the box, whole-vector step scaling, backtracking, stall detection,
position-wins polish), so a batch gives the same answers as one-by-one solves.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from hilbot.kinematics.codegen.batch_kernel import BatchKernel
from hilbot.kinematics.ik.batch.dls_step import damped
from hilbot.kinematics.ik.batch.inputs import BatchTargets
from hilbot.kinematics.ik.batch.results import STATUSES
from hilbot.kinematics.ik.core.context import Context
from hilbot.kinematics.ik.core.context import _rotation_error as rotation_error_floats
from hilbot.kinematics.ik.core.residual import axis_error, rotation_error
from hilbot.kinematics.ik.core.solution import Status
from hilbot.kinematics.ik.core.solver import SolveOptions
from hilbot.kinematics.ik.core.target import OrientationKind
from hilbot.kinematics.ik.dls.dls_solver import DLSSolver

Array = NDArray[np.float64]
Ints = NDArray[np.int64]
Out = tuple[Array, Array, Array, Ints, Ints]  # q, residual, orientation, status, iterations
_RUNNING = -1
_ARRAY_STEP_MIN = 128  # below this batch size numpy.linalg.solve is cheaper
_FLOATS_MAX = 16  # up to this many items, task errors are computed on Python floats


Batch = BatchTargets  # (B, 3) points and (B, 3, 3) rotations or (B, 3) axes


class BatchRun:
    """One batched solve: the DLS iteration with per-item state."""

    def __init__(
        self,
        s: DLSSolver,
        ctx: Context,
        lo: Array,
        hi: Array,
        options: SolveOptions,
        kernel: BatchKernel | None = None,
    ) -> None:
        self.s = s
        self.ctx = ctx
        self.kernel = kernel
        self.lo, self.hi = _shared_row(lo), _shared_row(hi)
        self.options = options
        self.bounded = bool(np.isfinite(lo).any() or np.isfinite(hi).any())
        self.stall_iterations, self.stall_ratio = options.stall or (
            s.stall_iterations,
            s.stall_ratio,
        )

    def solve(self, q0: Array, batch: Batch) -> Out:
        """Phase 1 on every item, then position-only polishing where position lost."""
        q, res, ori, status, its = self.iterate(q0, batch, self.options.max_iterations)
        if batch.kind is OrientationKind.NONE:
            return q, res, ori, status, its
        # Each item's polish gets the iterations it has left (as ``DLSSolver`` does).
        budget = self.options.max_iterations - its
        polish = (res > self.options.tolerance) & (status != STATUSES.index(Status.TIMEOUT))
        polish &= (budget > 0) & ~self.on_delta_bound(q)
        if polish.any():
            idx = np.flatnonzero(polish)
            sub = Batch(OrientationKind.NONE, batch.point[idx], None)
            saved = self.lo, self.hi
            self.lo, self.hi = self._rows(self.lo, idx), self._rows(self.hi, idx)
            q2, res2, _, status2, its2 = self.iterate(q[idx], sub, budget[idx])
            self.lo, self.hi = saved
            better = res2 < res[idx]
            take = idx[better]
            q[take] = q2[better]
            its[take] += its2[better]
            converged = status2[better] == STATUSES.index(Status.CONVERGED)
            status[take] = np.where(converged, STATUSES.index(Status.STALLED), status2[better])
            _, res[take], ori[take] = self.errors(q[take], self._sub(batch, take))
        return q, res, ori, status, its

    @staticmethod
    def _rows(bound: Array, idx: NDArray[np.intp]) -> Array:
        return bound[idx] if bound.shape[0] > 1 else bound

    @staticmethod
    def _sub(batch: Batch, idx: NDArray[np.intp]) -> Batch:
        orientation = None if batch.orientation is None else batch.orientation[idx]
        return Batch(batch.kind, batch.point[idx], orientation)

    def on_delta_bound(self, q: Array) -> NDArray[np.bool_]:
        """(B,) whether each item sits on a ``max_delta`` bound that is not a joint limit."""
        if self.options.max_delta is None:
            return np.zeros(q.shape[0], dtype=bool)
        info = self.ctx.info
        at_lo = (q <= self.lo + 1e-12) & (self.lo > info.lower)
        at_hi = (q >= self.hi - 1e-12) & (self.hi < info.upper)
        return np.asarray((at_lo | at_hi).any(axis=1))

    def fk_jacobian(self, q: Array) -> tuple[Array, Array]:
        """Poses (B, 3, 4) and Jacobians (6, dof, B), from the generated kernel if any.

        Jacobians keep the batch on the last axis (the layout of ``dls_step.damped``).
        """
        if self.kernel is not None:
            pose, jac = self.kernel(q)
            return pose.T.reshape(-1, 3, 4), jac
        pose, jac = self.ctx.chain.fk_jacobian_batch(q)
        return np.asarray(pose)[:, :3], np.ascontiguousarray(np.transpose(jac, (1, 2, 0)))

    def integrate(self, q: Array, dq: Array) -> Array:
        """``q`` moved by ``dq`` (row by row through the chain for multi-DoF joints)."""
        if self.ctx.scalar:
            return q + dq
        return np.array([self.ctx.chain.integrate(a, b) for a, b in zip(q, dq, strict=True)])

    def errors(self, q: Array, batch: Batch) -> tuple[Array, Array, Array]:
        """Task errors (B, m), position residuals (B,) and orientation residuals (B,)."""
        pose, _ = self.fk_jacobian(q)
        return _errors(pose, batch)

    def iterate(self, q0: Array, batch: Batch, max_iterations: int | Ints) -> Out:
        """The DLS loop on every item (see ``DLSSolver``), vectorised.

        ``max_iterations`` is one budget for all items or a (B,) budget per item.
        """
        s = self.s
        size = q0.shape[0]
        w = s.orientation_weight
        rows = 3 if batch.kind is OrientationKind.NONE else 6
        weights = np.ones(rows)
        weights[3:] = w
        q = q0.copy()
        pose, jac = self.fk_jacobian(q)
        e, res, ori = _errors(pose, batch)
        jac = _task_jacobian(jac, pose, batch)
        cost = _cost(e, weights)
        status: Ints = np.full(size, _RUNNING, dtype=np.int64)
        its = np.zeros(size, dtype=np.int64)
        mu = np.ones(size)
        stall = np.zeros(size, dtype=np.int64)
        lo_all, hi_all = self.lo, self.hi
        while True:
            running = status == _RUNNING
            done = running & self.converged(res, ori, batch.kind)
            status[done] = 0
            status[running & ~done & (stall >= self.stall_iterations)] = 1
            status[(status == _RUNNING) & (its >= max_iterations)] = 3
            active = np.flatnonzero(status == _RUNNING)
            if active.size == 0:
                return q, res, ori, status, its
            its[active] += 1
            every = active.size == size  # no gathers needed
            lo = lo_all if every or lo_all.shape[0] == 1 else lo_all[active]
            hi = hi_all if every or hi_all.shape[0] == 1 else hi_all[active]
            ea = _clamp(e if every else e[active], s.position_clamp, s.orientation_clamp)
            lam2 = (mu if every else mu[active]) * (s.damping + 0.5 * _cost(ea, weights))
            jw = (jac if every else jac[:, :, active]) * weights[:, None, None]
            qa = q if every else q[active]
            ew = ea * weights
            dq, pinned = self.step(qa, jw, ew, lam2, lo, hi)
            biggest = np.abs(dq).max(axis=1)
            tiny = biggest < 1e-14
            status[active[tiny]] = 1
            scale = np.where(biggest > s.max_step, s.max_step / np.maximum(biggest, 1e-300), 1.0)
            dq *= scale[:, None]
            fallback = _Fallback(pinned, jw, ew, lam2, lo, hi)
            self.backtrack(
                q, e, res, ori, jac, cost, mu, stall, status, active, ~tiny, dq, batch, fallback
            )

    def backtrack(
        self,
        q: Array,
        e: Array,
        res: Array,
        ori: Array,
        jac: Array,
        cost: Array,
        mu: Array,
        stall: NDArray[np.int64],
        status: NDArray[np.int64],
        active: NDArray[np.intp],
        moving: NDArray[np.bool_],
        dq: Array,
        batch: Batch,
        fallback: _Fallback | None = None,
    ) -> None:
        """Accept, halve or give up on each item's step; update the state in place.

        An item whose step pinned coordinates and found no decrease tries the
        unconstrained step scaled as a whole into the box (as ``DLSSolver`` does).
        """
        s = self.s
        rows = e.shape[1]
        weights = np.ones(rows)
        weights[3:] = s.orientation_weight
        state = (q, e, res, ori, jac, cost, mu, stall)
        pending = self._rounds(state, active[moving], dq[moving], batch, weights, grow_mu=True)
        if pending.size and fallback is not None:
            where = np.searchsorted(active, pending)
            retry = fallback.pinned[where]
            status[pending[~retry]] = 2
            pending, where = pending[retry], where[retry]
            scaled, ok = fallback.scaled(where, q[pending], s.max_step)
            status[pending[~ok]] = 2
            pending = self._rounds(state, pending[ok], scaled[ok], batch, weights, grow_mu=False)
        status[pending] = 2  # diverged: no step helped; the last good state stays

    def _rounds(
        self,
        state: tuple[Array, Array, Array, Array, Array, Array, Array, NDArray[np.int64]],
        pending: NDArray[np.intp],
        dq: Array,
        batch: Batch,
        weights: Array,
        *,
        grow_mu: bool,
    ) -> NDArray[np.intp]:
        """Try ``dq`` on items ``pending``, halving it; accept in place; return the rest."""
        q, e, res, ori, jac, cost, mu, stall = state
        for _ in range(self.s.max_backtracks + 1):
            if pending.size == 0:
                return pending
            qn = self.clip(self.integrate(q[pending], dq), pending)
            pose, jn = self.fk_jacobian(qn)
            sub = self._sub(batch, pending)
            en, rn, on = _errors(pose, sub)
            cn = _cost(en, weights)
            ok = cn < cost[pending]
            if ok.all() and pending.size == q.shape[0]:  # every item accepted: no gathers
                little = cn > cost * (1.0 - self.stall_ratio)
                stall[:] = np.where(little, stall + 1, 0)
                np.maximum(1.0, 0.5 * mu, out=mu)
                q[:], e[:], res[:], ori[:], cost[:] = qn, en, rn, on, cn
                jac[...] = _task_jacobian(jn, pose, batch)
                return pending[:0]
            take = pending[ok]
            little = cn[ok] > cost[take] * (1.0 - self.stall_ratio)
            stall[take] = np.where(little, stall[take] + 1, 0)
            mu[take] = np.maximum(1.0, 0.5 * mu[take])
            q[take], e[take], res[take], ori[take], cost[take] = (
                qn[ok],
                en[ok],
                rn[ok],
                on[ok],
                cn[ok],
            )
            # Converged items never read their Jacobian again: only the others store it.
            more = ok & ~self.converged(rn, on, batch.kind)
            if more.any():
                sub_more = self._sub(batch, pending[more])
                jac[:, :, pending[more]] = _task_jacobian(jn[:, :, more], pose[more], sub_more)
            pending, dq = pending[~ok], 0.5 * dq[~ok]
            if grow_mu:
                mu[pending] *= 4.0
        return pending

    def converged(self, res: Array, ori: Array, kind: OrientationKind) -> NDArray[np.bool_]:
        """(B,) whether each item is within the tolerances of its task."""
        done = res <= self.options.tolerance
        if kind is not OrientationKind.NONE:
            done &= ori <= self.options.orientation_tolerance
        return done

    def clip(self, q: Array, idx: NDArray[np.intp]) -> Array:
        """Rows ``idx`` of the box applied to ``q`` (guards rounding)."""
        if not self.bounded:
            return q
        lo = self.lo[idx] if self.lo.shape[0] > 1 else self.lo
        hi = self.hi[idx] if self.hi.shape[0] > 1 else self.hi
        return np.minimum(np.maximum(q, lo), hi)

    def step(
        self, q: Array, jw: Array, ew: Array, lam2: Array, lo: Array, hi: Array
    ) -> tuple[Array, NDArray[np.bool_]]:
        """Damped steps with the box handled by an active set, for every item.

        Returns the steps and whether each item pinned some coordinate.
        """
        size = jw.shape[2]
        dq = _damped(jw, ew, lam2)  # everything free: no masking, no merge
        if not self.bounded:
            return dq, np.zeros(size, dtype=bool)
        new = q + dq
        violated = (new > hi) | (new < lo)
        hit = np.flatnonzero(violated.any(axis=1))
        pinned = np.zeros(size, dtype=bool)
        if hit.size == 0:
            return dq, pinned
        # Only items that pinned a coordinate are solved again (the others keep their
        # step: re-solving them with nothing masked would give the same numbers).
        pinned[hit] = True
        dq[hit] = self._pinned_steps(
            q[hit],
            jw[:, :, hit],
            ew[hit],
            lam2[hit],
            dq[hit],
            violated[hit],
            self._rows(lo, hit),
            self._rows(hi, hit),
        )
        return dq, pinned

    @staticmethod
    def _pinned_steps(
        q: Array,
        jw: Array,
        ew: Array,
        lam2: Array,
        dq: Array,
        violated: NDArray[np.bool_],
        lo: Array,
        hi: Array,
    ) -> Array:
        """The active-set rounds for items whose free step left the box."""
        free = np.ones(violated.shape, dtype=bool)
        r = ew.copy()
        new = q + dq
        for _ in range(jw.shape[1]):
            pinned = np.where(violated, np.where(new > hi, hi, lo) - q, 0.0)
            dq = np.where(violated, pinned, dq)
            r -= np.einsum("ijb,bj->bi", jw, pinned)
            free &= ~violated
            sub = _damped(jw * free.T[None], r, lam2)
            dq = np.where(free, sub, dq)
            new = q + dq
            violated = free & ((new > hi) | (new < lo))
            if not violated.any():
                return dq
        return np.where(violated, np.where(new > hi, hi, lo) - q, dq)  # pin the last ones


class _Fallback(NamedTuple):
    """What an item needs for the scaled fallback step (rows follow the active items)."""

    pinned: NDArray[np.bool_]  # the active-set step pinned some coordinate
    jw: Array  # weighted task Jacobians (m, n, B)
    ew: Array  # weighted clamped errors
    lam2: Array  # damping
    lo: Array  # box rows (or one shared row)
    hi: Array

    def scaled(
        self, where: NDArray[np.intp], q: Array, max_step: float
    ) -> tuple[Array, NDArray[np.bool_]]:
        """The unconstrained step, scaled as a whole into the box, for items ``where``.

        Coordinates on a bound that the step pushes outwards are held first (the step
        is re-solved for the others). Returns the steps and which items can move.
        """
        jw, ew, lam2 = self.jw[:, :, where], self.ew[where], self.lam2[where]
        lo = self.lo[where] if self.lo.shape[0] > 1 else self.lo
        hi = self.hi[where] if self.hi.shape[0] > 1 else self.hi
        if where.size == 0:
            return np.zeros_like(q), np.zeros(0, dtype=bool)
        dq = _damped(jw, ew, lam2)
        held = ((q >= hi) & (dq > 0.0)) | ((q <= lo) & (dq < 0.0))
        if held.any():
            sub = _damped(jw * (~held).T[None], ew, lam2)
            dq = np.where(held, 0.0, sub)
        with np.errstate(divide="ignore", invalid="ignore"):
            up = np.where((dq > 0.0) & (q + dq > hi), (hi - q) / dq, 1.0)
            down = np.where((dq < 0.0) & (q + dq < lo), (lo - q) / dq, 1.0)
        scale = np.minimum(np.minimum(up, down).min(axis=1), 1.0)
        biggest = np.maximum(np.abs(dq).max(axis=1), 1e-300)
        scale = np.minimum(scale, max_step / biggest)
        ok = (scale > 0.0) & ~held.all(axis=1)
        return dq * scale[:, None], ok


def _shared_row(bound: Array) -> Array:
    """A (B, n) bound broadcast from one row, as that (1, n) row (no per-item gathers)."""
    if bound.shape[0] > 1 and bound.strides[0] == 0:
        return bound[:1]
    return bound


def _damped(cols: Array, r: Array, lam2: Array) -> Array:
    """``argmin |J dq - r|² + lam2 |dq|²`` per item, via the smaller normal matrix.

    ``cols`` holds the Jacobians as (m, n, B); returns (B, n).
    """
    rows, n, size = cols.shape
    if size >= _ARRAY_STEP_MIN:
        return damped(cols, r, lam2)
    jac = cols.transpose(2, 0, 1)
    if n >= rows:
        a = jac @ jac.transpose(0, 2, 1)
        a[:, np.arange(rows), np.arange(rows)] += lam2[:, None]
        y = np.linalg.solve(a, r[:, :, None])[:, :, 0]
        return np.asarray(np.einsum("bij,bi->bj", jac, y))
    a = jac.transpose(0, 2, 1) @ jac
    a[:, np.arange(n), np.arange(n)] += lam2[:, None]
    b = np.einsum("bij,bi->bj", jac, r)
    return np.asarray(np.linalg.solve(a, b[:, :, None])[:, :, 0])


def _cost(e: Array, weights: Array) -> Array:
    return np.asarray(np.einsum("bi,bi->b", e * weights, e * weights))


def _clamp(e: Array, position: float, orientation: float) -> Array:
    """``e`` with its position and rotation parts scaled to at most the clamps (a copy)."""
    out = e.copy()
    for part, limit in ((slice(0, 3), position), (slice(3, 6), orientation)):
        if part.start >= e.shape[1]:
            break
        norm = np.sqrt(np.einsum("bi,bi->b", e[:, part], e[:, part]))
        over = np.flatnonzero(norm > limit)
        if over.size:  # the others are left as they are (a factor of 1)
            out[over, part] *= (limit / norm[over])[:, None]
    return out


def _errors(pose: Array, batch: Batch) -> tuple[Array, Array, Array]:
    """Errors (B, 3 or 6), position residuals and orientation residuals (NaN if none)."""
    if batch.kind is OrientationKind.FULL:
        assert batch.orientation is not None
        return _full_errors(pose, batch.point, batch.orientation)
    ep = batch.point - pose[:, :3, 3]
    res = np.sqrt(np.einsum("bi,bi->b", ep, ep))
    if batch.kind is OrientationKind.NONE:
        return ep, res, np.full(res.shape, np.nan)
    assert batch.orientation is not None
    eo, angle = _axis_errors(batch.orientation, pose[:, :3, 2])
    return np.concatenate([ep, eo], axis=1), res, angle


def _full_errors(pose: Array, point: Array, target: Array) -> tuple[Array, Array, Array]:
    """``_errors`` for full poses, straight-line on (B,) vectors as ``context`` does on floats."""
    size = pose.shape[0]
    if size <= _FLOATS_MAX:
        return _full_errors_floats(pose, point, target)
    e = np.empty((size, 6))
    ep = np.subtract(point, pose[:, :3, 3], out=e[:, :3])
    res = np.sqrt(np.einsum("bi,bi->b", ep, ep))
    t: list[Array] = list(np.ascontiguousarray(target.reshape(size, 9).T))  # t00 t01 ... t22
    p = [pose[:, i, j] for i in range(3) for j in range(3)]
    # m = R_t Rᵀ, m_ij = (row i of R_t) . (row j of R)
    trace = t[0] * p[0] + t[1] * p[1] + t[2] * p[2]
    for k in range(3, 9):
        trace += t[k] * p[k]

    def m(i: int, j: int) -> Array:
        return t[3 * i] * p[3 * j] + t[3 * i + 1] * p[3 * j + 1] + t[3 * i + 2] * p[3 * j + 2]

    vx, vy, vz = m(2, 1) - m(1, 2), m(0, 2) - m(2, 0), m(1, 0) - m(0, 1)
    s2 = np.sqrt(vx * vx + vy * vy + vz * vz)
    angle = np.arctan2(0.5 * s2, 0.5 * (trace - 1.0))
    scale = np.where(s2 > 1e-12, angle / np.maximum(s2, 1e-300), 0.5)
    np.multiply(vx, scale, out=e[:, 3])
    np.multiply(vy, scale, out=e[:, 4])
    np.multiply(vz, scale, out=e[:, 5])
    near_pi = angle >= math.pi - 1e-4
    if near_pi.any():  # the antisymmetric part vanishes there: use the scalar path
        for b in np.flatnonzero(near_pi):
            e[b, 3:], angle[b] = rotation_error(target[b], pose[b, :3, :3])
    return e, res, angle


def _full_errors_floats(pose: Array, point: Array, target: Array) -> tuple[Array, Array, Array]:
    """``_full_errors`` item by item on Python floats (cheaper for a few items).

    The rotation error is the single solver's scalar one (numpy near a half turn).
    """
    rows: list[list[float]] = []
    for p, x, t in zip(pose.tolist(), point.tolist(), target.tolist(), strict=True):
        flat = p[0] + p[1] + p[2]  # the top 3x4 block, row-major
        rx, ry, rz, angle = rotation_error_floats((*t[0], *t[1], *t[2]), flat)
        ex, ey, ez = x[0] - flat[3], x[1] - flat[7], x[2] - flat[11]
        rows.append([ex, ey, ez, rx, ry, rz, math.sqrt(ex * ex + ey * ey + ez * ez), angle])
    out = np.array(rows).reshape(-1, 8)
    return out[:, :6].copy(), out[:, 6].copy(), out[:, 7].copy()


def _axis_errors(axis: Array, z: Array) -> tuple[Array, Array]:
    c = np.cross(z, axis)
    s = np.linalg.norm(c, axis=1)
    angle = np.arctan2(s, np.einsum("bi,bi->b", z, axis))
    rotvec = c * np.where(s > 1e-12, angle / np.maximum(s, 1e-300), 0.0)[:, None]
    opposite = (s <= 1e-12) & (angle > 1.0)
    if opposite.any():
        for b in np.flatnonzero(opposite):
            rotvec[b], angle[b] = axis_error(axis[b], _frame(z[b]))
    return rotvec, angle


def _frame(z: Array) -> Array:
    """A (3, 3) matrix whose third column is ``z`` (enough for ``axis_error``)."""
    out = np.zeros((3, 3))
    out[:, 2] = z
    return out


def _task_jacobian(jac: Array, pose: Array, batch: Batch) -> Array:
    """The Jacobian rows (m, n, B) matching the task (angular rows projected for tool axes)."""
    if batch.kind is OrientationKind.NONE:
        return jac[:3]
    if batch.kind is OrientationKind.FULL:
        return jac
    z = np.ascontiguousarray(pose[:, :3, 2].T)  # (3, B)
    angular = jac[3:]
    along = np.einsum("ib,inb->nb", z, angular)
    projected = angular - z[:, None, :] * along[None, :, :]
    return np.concatenate([jac[:3], projected], axis=0)
