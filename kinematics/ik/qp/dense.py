"""Small dense convex QP solvers in numpy: a box path and a general inequality path.

Both minimise ``0.5 x' H x + f' x`` with ``H`` symmetric positive definite (the IK
problems always carry damping, so it is).

- :func:`solve_box_qp` handles ``lb <= x <= ub`` only, with a primal active-set
  method on the bounds: every iterate is inside the box (exact feasibility, no
  tolerance), and each iteration solves one reduced Newton system on the free
  variables.
- :func:`solve_qp` adds general rows ``G x <= h`` and uses the dual active-set
  method of Goldfarb and Idnani (Math. Programming 27, 1983): start at the
  unconstrained minimum, add the most violated constraint, and keep the active
  normals linearly independent. The active-set projection is recomputed from the
  small Gram matrix of ``L^-1 N`` each step, which is cheap at the sizes IK
  produces (a dozen variables, a few dozen rows).

Nothing raises on an infeasible problem: the result carries a :class:`QPStatus`.
"""

from __future__ import annotations

import enum
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

__all__ = ["QPResult", "QPStatus", "solve_box_qp", "solve_qp"]

FloatArray = NDArray[np.float64]

# Feasibility tolerance on a constraint value, relative to (1 + |h|).
_FEAS_TOL = 1e-12
# Multiplier tolerance: a bound whose multiplier is above -_DUAL_TOL stays active.
_DUAL_TOL = 1e-12


class QPStatus(enum.Enum):
    """How a QP solve ended."""

    OPTIMAL = "optimal"
    INFEASIBLE = "infeasible"
    MAX_ITERATIONS = "max_iterations"


class QPResult(NamedTuple):
    """Solution of a dense QP.

    Attributes:
        x: The minimiser, shape (n,) (best effort when not optimal).
        status: How the solve ended.
        iterations: Active-set changes made.
        active: Indices of the active general rows (box bounds are not listed; see
            :func:`solve_box_qp` for its own convention).
    """

    x: FloatArray
    status: QPStatus
    iterations: int
    active: tuple[int, ...]


def _check(h_mat: FloatArray, f: FloatArray) -> int:
    n = int(f.shape[0])
    if h_mat.shape != (n, n):
        raise ValueError(f"H has shape {h_mat.shape}, expected ({n}, {n}) to match f")
    return n


def solve_box_qp(
    h_mat: FloatArray,
    f: FloatArray,
    lb: FloatArray,
    ub: FloatArray,
    *,
    max_iterations: int | None = None,
) -> QPResult:
    """Minimise ``0.5 x'Hx + f'x`` subject to ``lb <= x <= ub``.

    Primal active set on the bounds, started from the clipped unconstrained
    minimiser. Each iterate stays inside the box exactly.

    Args:
        h_mat: Symmetric positive definite Hessian, shape (n, n).
        f: Linear term, shape (n,).
        lb: Lower bounds, shape (n,); ``-inf`` for none.
        ub: Upper bounds, shape (n,); ``+inf`` for none.
        max_iterations: Cap on active-set changes (default ``4 n + 10``).

    Returns:
        The result; ``active`` lists the variables held at a bound. ``INFEASIBLE``
        when some ``lb > ub`` (then ``x`` is the clip of the unconstrained minimiser
        onto ``[lb, max(lb, ub)]``).

    Raises:
        ValueError: When shapes disagree or a bound is NaN, a lower bound is
            ``+inf`` or an upper bound ``-inf``.
    """
    n = _check(h_mat, f)
    if lb.shape != (n,) or ub.shape != (n,):
        raise ValueError(f"bounds must have shape ({n},), got {lb.shape} and {ub.shape}")
    x: FloatArray = np.linalg.solve(h_mat, -f).astype(np.float64, copy=False)
    # Fast path (the common IK case): strictly inside. NaN, lb = +inf or ub = -inf
    # bounds fail these comparisons, so the checks below still see every bad input.
    if (x > lb).all() and (x < ub).all():
        return QPResult(x, QPStatus.OPTIMAL, 0, ())
    if not ((lb < np.inf).all() and (ub > -np.inf).all()):
        raise ValueError(f"bounds must not be NaN, lb +inf or ub -inf: lb={lb}, ub={ub}")
    if np.any(lb > ub):
        return QPResult(np.clip(x, lb, np.maximum(lb, ub)), QPStatus.INFEASIBLE, 0, ())
    below = x <= lb
    above = x >= ub
    # n is small: the bookkeeping runs on Python lists, numpy only does the linear algebra.
    lo = lb.tolist()
    hi = ub.tolist()
    xs = np.minimum(np.maximum(x, lb), ub).tolist()
    # state: -1 held at the lower bound, +1 at the upper bound, 0 free, 2 fixed (lb == ub)
    state = [
        2 if lo[i] == hi[i] else (-1 if below[i] else (1 if above[i] else 0)) for i in range(n)
    ]
    cap = 4 * n + 10 if max_iterations is None else max_iterations
    for iteration in range(1, cap + 1):
        free = [i for i in range(n) if state[i] == 0]
        fixed = [i for i in range(n) if state[i] != 0]
        if free:
            target = _reduced_newton(h_mat, f, xs, free, fixed)
            alpha, block, block_up = _first_block(xs, target, free, lo, hi)
            if block >= 0:
                for j, i in enumerate(free):
                    xs[i] += alpha * (target[j] - xs[i])
                xs[block] = hi[block] if block_up else lo[block]
                state[block] = 1 if block_up else -1
                continue
            for j, i in enumerate(free):
                xs[i] = target[j]
        x = np.array(xs)
        gradient = (h_mat @ x + f).tolist()
        worst, worst_value = -1, 0.0
        for i in fixed:
            if state[i] == 2:
                continue
            value = -gradient[i] * state[i]  # multiplier of the held bound
            if value < worst_value - _DUAL_TOL * (1.0 + abs(gradient[i])):
                worst, worst_value = i, value
        if worst < 0:
            return QPResult(x, QPStatus.OPTIMAL, iteration, tuple(fixed))
        state[worst] = 0
    fixed = [i for i in range(n) if state[i] != 0]
    return QPResult(np.array(xs), QPStatus.MAX_ITERATIONS, cap, tuple(fixed))


def _reduced_newton(
    h_mat: FloatArray, f: FloatArray, xs: list[float], free: list[int], fixed: list[int]
) -> list[float]:
    """Minimiser over the free variables with the fixed ones held where they are."""
    rhs = -f[free]
    if fixed:
        rhs = rhs - h_mat[free][:, fixed] @ np.array([xs[i] for i in fixed])
    result: list[float] = np.linalg.solve(h_mat[free][:, free], rhs).tolist()
    return result


def _first_block(
    xs: list[float], target: list[float], free: list[int], lo: list[float], hi: list[float]
) -> tuple[float, int, bool]:
    """First bound hit on the segment from ``xs`` to ``target``: (alpha, index, upper).

    Returns index -1 when the whole segment is inside the box.
    """
    alpha, block, block_up = 1.0, -1, False
    for j, i in enumerate(free):
        step = target[j] - xs[i]
        if step > 0.0 and target[j] > hi[i]:
            a, up = (hi[i] - xs[i]) / step, True
        elif step < 0.0 and target[j] < lo[i]:
            a, up = (lo[i] - xs[i]) / step, False
        else:
            continue
        if a < alpha:
            alpha, block, block_up = a, i, up
    return max(alpha, 0.0), block, block_up


def solve_qp(
    h_mat: FloatArray,
    f: FloatArray,
    g_mat: FloatArray | None = None,
    h_vec: FloatArray | None = None,
    lb: FloatArray | None = None,
    ub: FloatArray | None = None,
    *,
    max_iterations: int | None = None,
) -> QPResult:
    """Minimise ``0.5 x'Hx + f'x`` subject to ``G x <= h`` and ``lb <= x <= ub``.

    Dual active set (Goldfarb-Idnani). With no general rows it dispatches to
    :func:`solve_box_qp`. Box bounds become rows internally; the returned ``x`` is
    finally clipped into the box so that bounds hold exactly.

    Args:
        h_mat: Symmetric positive definite Hessian, shape (n, n).
        f: Linear term, shape (n,).
        g_mat: Inequality rows, shape (m, n), or None.
        h_vec: Right-hand sides, shape (m,), or None.
        lb: Lower bounds, shape (n,), or None.
        ub: Upper bounds, shape (n,), or None.
        max_iterations: Cap on active-set changes (default ``3 (m + 2n) + 20``).

    Returns:
        The result; ``active`` lists active rows of ``G`` (not box bounds).

    Raises:
        ValueError: When shapes disagree, ``G`` is given without ``h``, or a bound
            is NaN, a lower bound ``+inf`` or an upper bound ``-inf``.
    """
    n = _check(h_mat, f)
    lb_ = np.full(n, -np.inf) if lb is None else lb
    ub_ = np.full(n, np.inf) if ub is None else ub
    if (g_mat is None) != (h_vec is None):
        raise ValueError("G and h must be given together")
    if g_mat is None or h_vec is None or g_mat.shape[0] == 0:
        return solve_box_qp(h_mat, f, lb_, ub_, max_iterations=max_iterations)
    m = g_mat.shape[0]
    if g_mat.shape != (m, n) or h_vec.shape != (m,):
        raise ValueError(f"G must be (m, {n}) and h (m,), got {g_mat.shape} and {h_vec.shape}")
    if not ((lb_ < np.inf).all() and (ub_ > -np.inf).all()):
        raise ValueError(f"bounds must not be NaN, lb +inf or ub -inf: lb={lb_}, ub={ub_}")
    if np.any(lb_ > ub_):
        x0 = np.clip(np.linalg.solve(h_mat, -f), lb_, np.maximum(lb_, ub_))
        return QPResult(x0, QPStatus.INFEASIBLE, 0, ())
    rows, rhs, general = _stack_rows(g_mat, h_vec, lb_, ub_)
    x, status, iterations, active = _goldfarb_idnani(h_mat, f, rows, rhs, max_iterations)
    if status is QPStatus.OPTIMAL and active:
        x = _refine(h_mat, f, rows[active], rhs[active], x)
    x = np.clip(x, lb_, ub_)
    return QPResult(x, status, iterations, tuple(i for i in active if i < general))


def _stack_rows(
    g_mat: FloatArray, h_vec: FloatArray, lb: FloatArray, ub: FloatArray
) -> tuple[FloatArray, FloatArray, int]:
    """Append finite box bounds to the general rows (general rows keep their indices)."""
    n = lb.shape[0]
    eye = np.eye(n)
    has_up = np.isfinite(ub)
    has_low = np.isfinite(lb)
    rows = np.vstack([g_mat, eye[has_up], -eye[has_low]])
    rhs = np.concatenate([h_vec, ub[has_up], -lb[has_low]])
    return rows, rhs, g_mat.shape[0]


def _goldfarb_idnani(
    h_mat: FloatArray,
    f: FloatArray,
    rows: FloatArray,
    rhs: FloatArray,
    max_iterations: int | None,
) -> tuple[FloatArray, QPStatus, int, list[int]]:
    """Dual active-set iterations on ``rows x <= rhs``."""
    n = f.shape[0]
    chol = np.linalg.cholesky(h_mat)  # H = L L'
    l_inv = np.linalg.solve(chol, np.eye(n))  # L^-1; H^-1 = L^-T L^-1
    x = -(l_inv.T @ (l_inv @ f))
    active: list[int] = []
    dual = np.zeros(0)
    tol = _FEAS_TOL * (1.0 + np.abs(rhs))
    cap = 3 * rows.shape[0] + 2 * n + 20 if max_iterations is None else max_iterations
    iterations = 0
    # Goldfarb-Idnani is stated for a'x >= b; our rows are n'x <= h, so a = -n.
    scaled = -rows @ l_inv.T  # row i is (L^-1 a_i)'
    while True:
        slack = rhs - rows @ x  # >= 0 when satisfied
        violation = np.where(slack < -tol, slack, 0.0)
        if active:
            violation[active] = 0.0
        p = int(np.argmin(violation))
        if violation[p] >= 0.0:
            return x, QPStatus.OPTIMAL, iterations, active
        dual_p = 0.0
        while True:
            iterations += 1
            if iterations > cap:
                return x, QPStatus.MAX_ITERATIONS, iterations, active
            z, r = _gi_directions(l_inv, scaled, active, p)
            denom = -float(z @ rows[p])  # z' a_p >= 0
            # Relative test: denom / |d|^2 is sin^2 of the angle between L^-1 a_p and
            # the span of the active normals (dual step only when it is ~0).
            if denom <= 1e-10 * float(scaled[p] @ scaled[p]):
                t_full = np.inf  # a_p is a combination of the active normals
            else:
                t_full = -float(rhs[p] - rows[p] @ x) / denom
            t_part, k = np.inf, -1
            if r.size:
                with np.errstate(divide="ignore", invalid="ignore"):
                    ratios = np.where(r > 1e-14, dual / r, np.inf)
                k = int(np.argmin(ratios))
                t_part = float(ratios[k])
            t = min(t_full, t_part)
            if not np.isfinite(t):
                return x, QPStatus.INFEASIBLE, iterations, active
            if np.isfinite(t_full):
                x = x + t * z
            dual = dual - t * r
            dual_p += t
            if t_full <= t_part:
                active.append(p)
                dual = np.append(dual, dual_p)
                break
            del active[k]
            dual = np.delete(dual, k)


def _refine(
    h_mat: FloatArray, f: FloatArray, rows: FloatArray, rhs: FloatArray, x: FloatArray
) -> FloatArray:
    """Re-solve the KKT system of the final active set, so active rows hold to round-off.

    The dual iterations accumulate steps; after many of them the active rows drift by
    ~1e-10. One direct solve of ``[H A'; A 0] [x; y] = [-f; b]`` removes the drift.
    """
    n = f.shape[0]
    q = rows.shape[0]
    kkt = np.zeros((n + q, n + q))
    kkt[:n, :n] = h_mat
    kkt[:n, n:] = rows.T
    kkt[n:, :n] = rows
    try:
        solution = np.linalg.solve(kkt, np.concatenate([-f, rhs]))
    except np.linalg.LinAlgError:
        return x
    refined: FloatArray = solution[:n]
    if not np.all(np.abs(refined - x) <= 1e-6 * (1.0 + np.abs(x))):
        return x  # not a round-off correction: keep the iterate
    return refined


def _gi_directions(
    l_inv: FloatArray, scaled: FloatArray, active: list[int], p: int
) -> tuple[FloatArray, FloatArray]:
    """Primal step ``z`` and dual step ``r`` for adding row ``p`` to ``active``.

    With ``B = L^-1 N`` (active normals as columns) and ``d = L^-1 a_p``, the step
    projects ``d`` off the range of ``B``: ``r = (B'B)^-1 B'd`` and
    ``z = L^-T (d - B r)``. The active normals stay linearly independent (a row is
    only added when its ``z`` is nonzero), so ``B'B`` is invertible.
    """
    d = scaled[p]
    if not active:
        return l_inv.T @ d, np.zeros(0)
    b_rows = scaled[active]  # (q, n): B'
    r = np.linalg.solve(b_rows @ b_rows.T, b_rows @ d)
    z = l_inv.T @ (d - b_rows.T @ r)
    return z, r
