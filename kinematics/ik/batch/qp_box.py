"""Box-constrained convex QPs for a whole batch at once, solved exactly in float64.

``solve_box_batch(H, f, lo, hi)`` minimises ``0.5 x'H x + f'x`` subject to
``lo <= x <= hi`` for B problems stacked on the first axis, and returns for each
the point ``dense.solve_box_qp`` returns, computed by the same operations:

- the unconstrained minimiser of every problem (one stacked solve); where it is
  strictly inside the box it is the answer (the scalar fast path);
- for the others, a guess of which bounds hold (the bounds held at the previous IK
  iteration when given, else the ones the unconstrained minimiser breaks), then
  rounds of: solve the reduced system ``H_FF x_F = -f_F - H_FX x_X`` with the held
  variables pinned on their bounds, and check the KKT conditions with the scalar
  solver's tolerances; a problem that passes is done, the others update their
  guess from the primal violations and the multiplier signs (the primal-dual
  active-set rule of Hintermüller, Ito and Kunisch, SIAM J. Optim. 13, 2003).

The reduced systems are stacked by their number of free variables, so each
problem's system is the very matrix and right-hand side the scalar primal
active-set method factors for its final active set: the answers agree bit for bit
(the KKT point is unique because ``H`` is positive definite), not merely to the
conditioning of ``H`` times the rounding. After two plain rounds, a problem still
unsettled goes on with a primal active set (stacked): plain rounds on the nearly
singular Hessian of a redundant arm can cycle, primal ones never go uphill. Those
release every wrongly signed bound at once rather than the scalar method's one,
which took the Panda benchmark's hardest steps from 20 rounds to 12. One that the
primal rounds' cap stops is handed to the scalar solver itself. Held variables sit
exactly on their bounds and free ones are checked inside the box: the box holds
exactly, at every IK iteration.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from hilbot.kinematics.ik.batch.cholesky import MIN_BATCH, pinned_cholesky
from hilbot.kinematics.ik.qp.dense import solve_box_qp

Array = NDArray[np.float64]
Mask = NDArray[np.bool_]
_DUAL_TOL = 1e-12  # as dense._DUAL_TOL: a held bound is released below -1e-12 (1 + |g|)
_PDAS_ROUNDS = 2  # plain primal-dual rounds, then the primal active set (never uphill)


class BoxBatch(NamedTuple):
    """Minimisers (B, n), whether a bound held each (B,), and the held bounds (B, n) each.

    ``capped[b]`` is False exactly when the unconstrained minimiser of problem
    ``b`` lies strictly inside its box (the scalar solver's fast path).
    """

    x: Array
    capped: Mask
    lower: Mask
    upper: Mask


def solve_box_batch(
    h_mat: Array,
    f: Array,
    lo: Array,
    hi: Array,
    guess: tuple[Mask, Mask] | None = None,
    *,
    exact: bool = True,
) -> BoxBatch:
    """Minimise ``0.5 x'Hx + f'x`` s.t. ``lo <= x <= hi`` per problem (see the module docstring).

    Args:
        h_mat: (B, n, n) symmetric positive definite Hessians.
        f: (B, n) linear terms.
        lo: (B, n) lower bounds (``-inf`` for none), with ``lo <= hi``.
        hi: (B, n) upper bounds (``+inf`` for none).
        guess: (B, n) masks of the bounds expected to hold (lower, upper), e.g. the
            ones that held at the previous iteration; only a starting point.
        exact: reproduce ``solve_box_qp`` bit for bit (the unconstrained minimiser
            first, the final reduced systems as the scalar method builds them).
            ``False``: the same KKT points from the cheaper stacked solves, equal
            to rounding (``capped`` is then True wherever a bound holds).

    Returns:
        The minimisers, which problems a bound held, and the held bounds.
    """
    if not exact:
        return _fast(h_mat, f, lo, hi, guess)
    x = np.asarray(np.linalg.solve(h_mat, -f[:, :, None])[:, :, 0], dtype=np.float64)
    capped = np.asarray(~((x > lo) & (x < hi)).all(axis=1), dtype=bool)
    lower = np.zeros(x.shape, dtype=bool)
    upper = np.zeros(x.shape, dtype=bool)
    if not capped.any():
        return BoxBatch(x, capped, lower, upper)
    idx = np.flatnonzero(capped)
    h, g, low, high = h_mat[idx], f[idx], lo[idx], hi[idx]
    start_lo, start_hi = x[idx] <= low, x[idx] >= high
    if guess is not None:
        # The bounds that held last time, where there was a last time (a world whose
        # step was not held keeps the unconstrained minimiser's violations).
        seen = (guess[0][idx] | guess[1][idx]).any(axis=1)
        start_lo[seen] = guess[0][idx][seen] & np.isfinite(low[seen])
        start_hi[seen] = guess[1][idx][seen] & np.isfinite(high[seen])
    held_lo, held_hi, _, _ = _active_sets(h, g, low, high, start_lo, start_hi)
    fixed = low == high
    held = held_lo | held_hi | fixed
    pinned = np.where(held_lo | fixed, low, np.where(held_hi, high, 0.0))
    xs = reduced_solve(h, g, pinned, held)
    for k in np.flatnonzero(~_kkt(h, g, low, high, xs, held_lo, held_hi)):
        # The rounds' cheaper solves misjudged a knife edge: the scalar method decides.
        result = solve_box_qp(h[k], g[k], low[k], high[k])
        xs[k] = result.x
        held_lo[k] = (result.x <= low[k]) & ~fixed[k]
        held_hi[k] = (result.x >= high[k]) & ~fixed[k]
    x[idx] = np.minimum(np.maximum(xs, low), high)
    lower[idx], upper[idx] = held_lo, held_hi
    return BoxBatch(x, capped, lower, upper)


def _fast(
    h_mat: Array, f: Array, lo: Array, hi: Array, guess: tuple[Mask, Mask] | None
) -> BoxBatch:
    """The KKT points from the rounds' own solves, started from ``guess`` (or a vertex)."""
    if guess is None:
        # No last step: the vertex the steepest descent from 0 runs to (every bound the
        # gradient at 0 points to held). Velocity-capped steps hold most bounds, and
        # from no bound the first rounds' solves run along the nearly free directions
        # of a redundant arm and hit every bound anyway.
        start_lo, start_hi = (f > 0.0) & np.isfinite(lo), (f < 0.0) & np.isfinite(hi)
    else:  # a guess may name a bound this call does not have
        start_lo, start_hi = guess[0] & np.isfinite(lo), guess[1] & np.isfinite(hi)
    lower, upper, x, unchecked = _active_sets(h_mat, f, lo, hi, start_lo, start_hi)
    fixed = lo == hi
    # The rounds checked every world they settled; the primal rounds' cap stopped these.
    u = unchecked
    bad = u[~_kkt(h_mat[u], f[u], lo[u], hi[u], x[u], lower[u], upper[u])] if u.size else u
    for k in bad:
        result = solve_box_qp(h_mat[k], f[k], lo[k], hi[k])  # past the rounds' cap
        x[k] = result.x
        lower[k] = (result.x <= lo[k]) & ~fixed[k]
        upper[k] = (result.x >= hi[k]) & ~fixed[k]
    x = np.minimum(np.maximum(x, lo), hi)
    capped = np.asarray((lower | upper | fixed).any(axis=1), dtype=bool)
    return BoxBatch(x, capped, lower, upper)


def _kkt(h_mat: Array, f: Array, lo: Array, hi: Array, x: Array, lower: Mask, upper: Mask) -> Mask:
    """The scalar solver's optimality test: free variables inside, held multipliers signed."""
    grad = (h_mat @ x[:, :, None])[:, :, 0] + f
    tol = _DUAL_TOL * (1.0 + np.abs(grad))
    fixed = lo == hi
    free = ~(lower | upper | fixed)
    ok: Mask = ~(free & ((x < lo) | (x > hi))).any(axis=1)
    ok &= ~(lower & (grad < -tol)).any(axis=1) & ~(upper & (grad > tol)).any(axis=1)
    return ok


def _active_sets(
    h_mat: Array, f: Array, lo: Array, hi: Array, lower: Mask, upper: Mask
) -> tuple[Mask, Mask, Array, NDArray[np.intp]]:
    """The held bounds at the minimisers: primal-dual rounds, then primal rounds.

    The rounds only find the active sets; their solves (the held variables pinned
    by identity rows of one stacked system) are cheaper than the exact reduced ones.
    Returns the held bounds, the rounds' minimisers, and the problems the primal
    rounds ended at their cap (their last sets may not be optimal: the caller checks
    them).
    """
    size, n = f.shape
    fixed = lo == hi
    lower, upper = lower & ~fixed, upper & ~fixed
    out_lo = np.zeros((size, n), dtype=bool)
    out_hi = np.zeros((size, n), dtype=bool)
    out_x = np.empty((size, n))
    todo = np.arange(size)
    some_fixed = bool(fixed.any())
    x = np.zeros((size, n))
    for _ in range(_PDAS_ROUNDS):
        held = lower | upper
        if some_fixed:
            held |= fixed
        # Only the held entries of ``pinned`` are read (a fixed variable has lo == hi).
        x = _pinned_solve(h_mat, f, np.where(lower, lo, hi), held)
        grad = np.einsum("bij,bj->bi", h_mat, x)
        grad += f
        tol = np.abs(grad)
        tol += 1.0
        tol *= _DUAL_TOL
        free = ~held
        add_lo, add_hi = free & (x < lo), free & (x > hi)
        drop_lo, drop_hi = lower & (grad < -tol), upper & (grad > tol)
        keep = (add_lo | add_hi | drop_lo | drop_hi).any(axis=1)
        # Every problem's sets and point as they stand; later rounds overwrite the
        # unsettled ones (whole arrays in the first round: no gather).
        if todo.size == size:
            out_lo[:], out_hi[:], out_x[:] = lower, upper, x
        else:
            out_lo[todo], out_hi[todo], out_x[todo] = lower, upper, x
        if not keep.any():
            return out_lo, out_hi, out_x, np.zeros(0, dtype=np.intp)
        lower = add_lo | (lower & ~drop_lo)
        upper = add_hi | (upper & ~drop_hi)
        if not keep.all():
            todo, h_mat, f, lo, hi = todo[keep], h_mat[keep], f[keep], lo[keep], hi[keep]
            lower, upper, fixed, x = lower[keep], upper[keep], fixed[keep], x[keep]
    # Not settled yet: a primal active set from the last round's sets and point, stacked
    # (even for a handful of problems: its rounds cost less than the scalar method's
    # Python loop). Plain rounds on an ill-conditioned Hessian (a redundant arm's
    # nearly free direction) can cycle; primal rounds never go uphill.
    held_lo, held_hi, x, capped = _primal(h_mat, f, lo, hi, fixed, (lower, upper), x)
    out_lo[todo], out_hi[todo], out_x[todo] = held_lo, held_hi, x
    return out_lo, out_hi, out_x, todo[capped]


def _pinned_solve(h_mat: Array, f: Array, pinned: Array, held: Mask) -> Array:
    """The reduced minimisers from one stacked solve: held rows become identity rows.

    A free row keeps ``H_i x = -f_i`` (the held variables' terms included), a held
    row reads ``x_i = pinned_i``; the held values are then set exactly. From
    ``MIN_BATCH`` problems up the generated Cholesky (``cholesky``) is faster.
    """
    size, n = f.shape
    if size >= MIN_BATCH:
        return pinned_cholesky(h_mat, f, pinned, held)
    m = np.where(held[:, :, None], _eye(n), h_mat)
    rhs = np.where(held, pinned, -f)
    x = np.linalg.solve(m, rhs[:, :, None])[:, :, 0]
    return np.where(held, pinned, x)


@functools.cache
def _eye(n: int) -> Array:
    """The identity of size ``n`` (read only)."""
    eye = np.eye(n)
    eye.flags.writeable = False
    return eye


def _primal(
    h_mat: Array,
    f: Array,
    lo: Array,
    hi: Array,
    fixed: Mask,
    start: tuple[Mask, Mask],
    near: Array,
) -> tuple[Mask, Mask, Array, NDArray[np.intp]]:
    """A primal active set on a batch, ``dense.solve_box_qp``'s but releasing in bulk.

    It starts from the feasible point with the start sets' variables on their bounds
    and the others at ``near`` clipped into the box. Each round solves with the held
    variables pinned; a problem whose solution leaves the box steps to the first bound
    on the way (every bound reached there is held), one whose solution is inside moves
    there and releases every bound whose multiplier has the wrong sign, and one with
    none to release is done. Releasing several bounds still moves downhill (the point
    is not the minimiser of the larger face), so no face is visited twice except
    through a zero step on a degenerate vertex; the cap ends those.

    Returns the held bounds, the points, and the problems the cap stopped.
    """
    size, n = f.shape
    lower, upper = start[0].copy(), start[1].copy()
    x = np.where(lower | fixed, lo, np.where(upper, hi, np.minimum(np.maximum(near, lo), hi)))
    out_lo = np.zeros((size, n), dtype=bool)
    out_hi = np.zeros((size, n), dtype=bool)
    out_x = np.empty((size, n))
    todo = np.arange(size)
    some_fixed = bool(fixed.any())
    for _ in range(4 * n + 10):
        held = lower | upper
        if some_fixed:
            held |= fixed
        target = _pinned_solve(h_mat, f, x, held)
        over = target > hi
        over &= ~held
        under = target < lo
        under &= ~held
        blocked: Mask = np.asarray((over | under).any(axis=1))
        step = target - x
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(over, (hi - x) / step, np.where(under, (lo - x) / step, np.inf))
        alpha = ratio.min(axis=1)
        hit = ratio <= alpha[:, None]
        hit &= blocked[:, None]
        # (a held variable's step is 0: the pinned solve returns its value as given)
        a = np.where(blocked, np.maximum(alpha, 0.0), 0.0)
        moved = np.where(blocked[:, None], x + a[:, None] * step, target)
        up, down = hit & over, hit & under
        x = np.where(up, hi, np.where(down, lo, moved))
        upper |= up
        lower |= down
        grad = np.einsum("bij,bj->bi", h_mat, x)
        grad += f
        tol = np.abs(grad)
        tol += 1.0
        tol *= _DUAL_TOL
        wrong = (lower & (grad < -tol)) | (upper & (grad > tol))
        wrong &= ~blocked[:, None]
        settled = ~(blocked | wrong.any(axis=1))
        fin = np.flatnonzero(settled)
        if fin.size:
            out_lo[todo[fin]], out_hi[todo[fin]], out_x[todo[fin]] = lower[fin], upper[fin], x[fin]
        if fin.size == todo.size:
            return out_lo, out_hi, out_x, np.zeros(0, dtype=np.intp)
        lower &= ~wrong
        upper &= ~wrong
        if fin.size:
            keep = ~settled
            todo, h_mat, f, lo, hi = todo[keep], h_mat[keep], f[keep], lo[keep], hi[keep]
            lower, upper, fixed, x = lower[keep], upper[keep], fixed[keep], x[keep]
    # Problems still running at the cap keep their last sets; the caller's KKT check
    # hands them to the scalar solver.
    out_lo[todo], out_hi[todo], out_x[todo] = lower, upper, x
    return out_lo, out_hi, out_x, todo


def reduced_solve(h_mat: Array, f: Array, pinned: Array, held: Mask) -> Array:
    """``x`` with the held variables at ``pinned`` and the free ones minimising, per problem.

    Problems are stacked by their number of free variables ``k``; each solves
    ``H_FF x_F = -f_F - H_FX x_X`` on exactly the matrices ``dense.solve_box_qp``
    builds for its active set (free and held indices in increasing order).
    """
    x = pinned.copy()
    n = f.shape[1]
    free_count = n - held.sum(axis=1)
    order = np.argsort(held, axis=1, kind="stable")  # free indices first, each in order
    for k in np.unique(free_count):
        k = int(k)
        if k == 0:
            continue
        rows = np.flatnonzero(free_count == k)
        free = order[rows, :k]
        at = rows[:, None, None]
        rhs = -f[rows[:, None], free]
        if k < n:
            fixed = order[rows, k:]
            # ``h[free][:, fixed]`` in the scalar code is Fortran-ordered, and BLAS sums
            # a Fortran matrix-vector product in another order: lay each block out so.
            h_fx = h_mat[at, free[:, :, None], fixed[:, None, :]]
            h_fx = np.ascontiguousarray(h_fx.transpose(0, 2, 1)).transpose(0, 2, 1)
            x_fixed = np.ascontiguousarray(pinned[rows[:, None], fixed])
            rhs = rhs - (h_fx @ x_fixed[:, :, None])[:, :, 0]
        h_ff = h_mat[at, free[:, :, None], free[:, None, :]]
        x[rows[:, None], free] = np.linalg.solve(h_ff, rhs[:, :, None])[:, :, 0]
    return x


__all__ = ["BoxBatch", "reduced_solve", "solve_box_batch"]
