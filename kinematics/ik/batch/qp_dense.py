"""``dense.solve_qp`` for a batch: the Goldfarb-Idnani dual active set run in lockstep.

Every world runs the scalar method step for step (the same start at the
unconstrained minimiser, the same most-violated row, the same primal and dual
steps, the same ratio test and drops, the same final KKT refinement and clip),
with its own active set. The linear algebra of a step is stacked over the worlds
that are at it, grouped by the size of their active set, so each world sees the
very operations the scalar solver performs: its answer is the scalar answer, not
merely an answer of the same accuracy. The bookkeeping (which row to add or drop)
is on arrays; worlds leave the loop as they finish.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from hilbot.kinematics.ik.qp.dense import QPStatus

Array = NDArray[np.float64]
Ints = NDArray[np.int64]
_FEAS_TOL = 1e-12  # as dense._FEAS_TOL
_OPTIMAL, _INFEASIBLE, _MAX_ITERATIONS, _RUNNING = 0, 1, 2, 3
#: ``QPBatch.status`` codes, as indices into this tuple.
STATUSES = (QPStatus.OPTIMAL, QPStatus.INFEASIBLE, QPStatus.MAX_ITERATIONS)


class QPBatch(NamedTuple):
    """Minimisers (B, n), status codes (B,) (indices into ``STATUSES``), iterations (B,)."""

    x: Array
    status: Ints
    iterations: Ints


def solve_qp_batch(
    h_mat: Array, f: Array, g: Array, h: Array, rows: Ints, lo: Array, hi: Array
) -> QPBatch:
    """Minimise ``0.5 x'Hx + f'x`` s.t. ``G x <= h`` and ``lo <= x <= hi``, per world.

    Args:
        h_mat: (B, n, n) symmetric positive definite Hessians.
        f: (B, n) linear terms.
        g: (B, m, n) rows; a world's rows past ``rows[b]`` are padding.
        h: (B, m) right-hand sides (padding: ``+inf``).
        rows: (B,) real rows per world, each >= 1.
        lo: (B, n) lower bounds (``-inf`` for none), ``lo <= hi``.
        hi: (B, n) upper bounds (``+inf`` for none).

    Returns:
        What ``dense.solve_qp`` returns for each world (x, status, iterations).
    """
    size, n = f.shape
    eye = np.eye(n)
    # dense._stack_rows: the general rows, then the finite upper and lower bounds (the
    # infinite ones stay as inert rows with an infinite right-hand side).
    stacked = np.concatenate(
        [g, np.broadcast_to(eye, (size, n, n)), np.broadcast_to(-eye, (size, n, n))], axis=1
    )
    rhs = np.concatenate([h, hi, -lo], axis=1)
    boxes = np.isfinite(hi).sum(axis=1) + np.isfinite(lo).sum(axis=1)
    cap = 3 * (rows + boxes) + 2 * n + 20
    chol = np.linalg.cholesky(h_mat)
    l_inv = np.linalg.solve(chol, np.broadcast_to(eye, (size, n, n)))
    l_t = l_inv.transpose(0, 2, 1)
    x = -(l_t @ (l_inv @ f[:, :, None]))[:, :, 0]
    tol = _FEAS_TOL * (1.0 + np.abs(rhs))
    scaled = -(stacked @ l_t)  # row i: (L^-1 a_i)'
    run = _Run(stacked, rhs, tol, scaled, l_t, cap, x)
    run.loop()
    x = run.x
    done = np.flatnonzero((run.status == _OPTIMAL) & (run.count > 0))
    if done.size:
        x[done] = _refine(h_mat[done], f[done], stacked[done], rhs[done], run, done)
    x = np.minimum(np.maximum(x, lo), hi)
    return QPBatch(x, run.status.astype(np.int64), run.iterations)


class _Run:
    """The lockstep state: per world x, active rows (in order), duals, phase and status."""

    def __init__(
        self, stacked: Array, rhs: Array, tol: Array, scaled: Array, l_t: Array, cap: Ints, x: Array
    ) -> None:
        size, m, n = stacked.shape
        self.stacked, self.rhs, self.tol, self.scaled, self.l_t, self.cap = (
            stacked,
            rhs,
            tol,
            scaled,
            l_t,
            cap,
        )
        self.x = x.copy()
        self.active = np.zeros((size, n + 1), dtype=np.int64)
        self.dual = np.zeros((size, n + 1))
        self.count = np.zeros(size, dtype=np.int64)
        self.status = np.full(size, _RUNNING, dtype=np.int64)
        self.iterations = np.zeros(size, dtype=np.int64)
        self.p = np.zeros(size, dtype=np.int64)
        self.dual_p = np.zeros(size)
        self.inner = np.zeros(size, dtype=bool)
        self.is_active = np.zeros((size, m), dtype=bool)

    def loop(self) -> None:
        while True:
            outer = np.flatnonzero((self.status == _RUNNING) & ~self.inner)
            if outer.size:
                self._choose(outer)
            inner = np.flatnonzero((self.status == _RUNNING) & self.inner)
            if not inner.size:
                return
            self._step(inner)

    def _choose(self, w: Ints) -> None:
        """Outer step: the most violated row of each world, or optimal when none is."""
        slack = self.rhs[w] - (self.stacked[w] @ self.x[w][:, :, None])[:, :, 0]
        violation = np.where(slack < -self.tol[w], slack, 0.0)
        violation[self.is_active[w]] = 0.0
        p = np.argmin(violation, axis=1)
        worst = violation[np.arange(w.size), p]
        fine = worst >= 0.0
        self.status[w[fine]] = _OPTIMAL
        go = w[~fine]
        self.p[go] = p[~fine]
        self.dual_p[go] = 0.0
        self.inner[go] = True

    def _step(self, w: Ints) -> None:
        """Inner step: a primal and dual step towards adding row ``p`` (or dropping one)."""
        self.iterations[w] += 1
        over = self.iterations[w] > self.cap[w]
        self.status[w[over]] = _MAX_ITERATIONS
        w = w[~over]
        if not w.size:
            return
        for q in np.unique(self.count[w]):
            self._step_group(w[self.count[w] == q], int(q))

    def _step_group(self, w: Ints, q: int) -> None:
        k = np.arange(w.size)
        p = self.p[w]
        d = self.scaled[w, p]  # (k, n)
        l_t = self.l_t[w]
        if q:
            b_rows = self.scaled[w[:, None], self.active[w, :q]]  # (k, q, n)
            r = np.linalg.solve(b_rows @ b_rows.transpose(0, 2, 1), (b_rows @ d[:, :, None]))[
                :, :, 0
            ]
            z = (l_t @ (d - (b_rows.transpose(0, 2, 1) @ r[:, :, None])[:, :, 0])[:, :, None])[
                :, :, 0
            ]
        else:
            r = np.zeros((w.size, 0))
            z = (l_t @ d[:, :, None])[:, :, 0]
        row_p = self.stacked[w, p]
        x = self.x[w]
        denom = -(z[:, None, :] @ row_p[:, :, None])[:, 0, 0]
        dd = (d[:, None, :] @ d[:, :, None])[:, 0, 0]
        value = self.rhs[w, p] - (row_p[:, None, :] @ x[:, :, None])[:, 0, 0]
        with np.errstate(divide="ignore", invalid="ignore"):
            t_full = np.where(denom <= 1e-10 * dd, np.inf, -value / denom)
        dual = self.dual[w, :q]
        t_part = np.full(w.size, np.inf)
        drop = np.zeros(w.size, dtype=np.int64)
        if q:
            with np.errstate(divide="ignore", invalid="ignore"):
                ratios = np.where(r > 1e-14, dual / r, np.inf)
            drop = np.argmin(ratios, axis=1)
            t_part = ratios[k, drop]
        t = np.minimum(t_full, t_part)
        bad = ~np.isfinite(t)
        self.status[w[bad]] = _INFEASIBLE
        ok = ~bad
        move = ok & np.isfinite(t_full)
        self.x[w[move]] = x[move] + t[move, None] * z[move]
        if q:
            self.dual[w[ok], :q] = dual[ok] - t[ok, None] * r[ok]
        self.dual_p[w[ok]] += t[ok]
        add = ok & (t_full <= t_part)
        wa = w[add]
        self.active[wa, q] = p[add]
        self.dual[wa, q] = self.dual_p[wa]
        self.count[wa] += 1
        self.is_active[wa, p[add]] = True
        self.inner[wa] = False
        rem = np.flatnonzero(ok & ~add)
        for j in rem:  # drop active row ``drop[j]``, keeping the order of the others
            b, i = w[j], int(drop[j])
            self.is_active[b, self.active[b, i]] = False
            self.active[b, i : q - 1] = self.active[b, i + 1 : q].copy()
            self.dual[b, i : q - 1] = self.dual[b, i + 1 : q].copy()
            self.count[b] -= 1


def _refine(h_mat: Array, f: Array, stacked: Array, rhs: Array, run: _Run, worlds: Ints) -> Array:
    """``dense._refine`` per world: the KKT system of the final active set, grouped by its size."""
    n = f.shape[1]
    x = run.x[worlds].copy()
    counts = run.count[worlds]
    for q in np.unique(counts):
        idx = np.flatnonzero(counts == q)
        q = int(q)
        act = run.active[worlds[idx], :q]
        a = stacked[idx[:, None], act]  # (k, q, n)
        kkt = np.zeros((idx.size, n + q, n + q))
        kkt[:, :n, :n] = h_mat[idx]
        kkt[:, :n, n:] = a.transpose(0, 2, 1)
        kkt[:, n:, :n] = a
        b = np.concatenate([-f[idx], rhs[idx[:, None], act]], axis=1)
        try:
            solution = np.linalg.solve(kkt, b[:, :, None])[:, :n, 0]
        except np.linalg.LinAlgError:  # some system is singular: those keep their iterate
            solution = np.array([_solve_or_keep(kkt[j], b[j], x[i], n) for j, i in enumerate(idx)])
        old = x[idx]
        close = (np.abs(solution - old) <= 1e-6 * (1.0 + np.abs(old))).all(axis=1)
        x[idx[close]] = solution[close]
    return x


def _solve_or_keep(kkt: Array, b: Array, x: Array, n: int) -> Array:
    try:
        solution = np.asarray(np.linalg.solve(kkt, b)[:n], dtype=np.float64)
    except np.linalg.LinAlgError:
        return x
    return solution


__all__ = ["STATUSES", "QPBatch", "solve_qp_batch"]
