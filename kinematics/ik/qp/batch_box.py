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
conditioning of ``H`` times the rounding. After three plain rounds the rule is
safeguarded against cycling; a problem still unsettled after eight goes on with the
scalar method's primal active set (stacked), and one that method's iteration cap
stops is handed to the scalar solver itself. Held variables sit exactly on their
bounds and free ones are checked inside the box: the box holds exactly, at every IK
iteration.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from hilbot.kinematics.ik.qp.dense import solve_box_qp

Array = NDArray[np.float64]
Mask = NDArray[np.bool_]
_DUAL_TOL = 1e-12  # as dense._DUAL_TOL: a held bound is released below -1e-12 (1 + |g|)
_PDAS_ROUNDS = 3  # plain primal-dual rounds, then safeguarded ones
_ROUNDS = 8  # all rounds, then the primal active set (it never cycles)


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
    # The rounds checked every world they settled; the primal rounds' may have hit their cap.
    u = unchecked
    bad = u[~_kkt(h_mat[u], f[u], lo[u], hi[u], x[u], lower[u], upper[u])]
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
    rounds ended (their last sets may not be optimal: the caller checks them).
    """
    size, n = f.shape
    fixed = lo == hi
    lower, upper = lower & ~fixed, upper & ~fixed
    out_lo = np.zeros((size, n), dtype=bool)
    out_hi = np.zeros((size, n), dtype=bool)
    out_x = np.empty((size, n))
    todo = np.arange(size)
    checked = np.zeros(0, dtype=np.intp)
    some_fixed = bool(fixed.any())
    for rounds in range(_ROUNDS):
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
        ok = ~keep
        done = todo[ok]
        if done.size:
            out_lo[done], out_hi[done], out_x[done] = lower[ok], upper[ok], x[ok]
        if done.size == todo.size:
            return out_lo, out_hi, out_x, checked
        if rounds >= _PDAS_ROUNDS:
            # Safeguard against cycling (Judice and Pires, Comput. Oper. Res. 21, 1994):
            # add every violated bound, and release a bound only when none is violated,
            # then only the one with the most negative multiplier.
            adding = (add_lo | add_hi).any(axis=1)
            value = np.where(drop_lo, grad, np.where(drop_hi, -grad, np.inf))
            worst = np.argmin(value, axis=1)
            single = np.zeros_like(drop_lo)
            single[np.arange(worst.size), worst] = ~adding
            drop_lo, drop_hi = drop_lo & single, drop_hi & single
        lower = add_lo | (lower & ~drop_lo)
        upper = add_hi | (upper & ~drop_hi)
        if done.size:
            todo, h_mat, f, lo, hi = todo[keep], h_mat[keep], f[keep], lo[keep], hi[keep]
            lower, upper, fixed = lower[keep], upper[keep], fixed[keep]
    # Not settled yet: the primal active set of ``dense.solve_box_qp`` (one bound added
    # or released per round) from the last round's sets, stacked (even for a handful of
    # problems: its rounds cost less than the scalar method's Python loop).
    out_lo[todo], out_hi[todo], out_x[todo] = _primal(h_mat, f, lo, hi, fixed, (lower, upper))
    return out_lo, out_hi, out_x, todo


def _pinned_solve(h_mat: Array, f: Array, pinned: Array, held: Mask) -> Array:
    """The reduced minimisers from one stacked solve: held rows become identity rows.

    A free row keeps ``H_i x = -f_i`` (the held variables' terms included), a held
    row reads ``x_i = pinned_i``; the held values are then set exactly.
    """
    n = f.shape[1]
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
    h_mat: Array, f: Array, lo: Array, hi: Array, fixed: Mask, start: tuple[Mask, Mask]
) -> tuple[Mask, Mask, Array]:
    """``dense.solve_box_qp``'s primal active set on a batch: one bound added or released.

    It starts from the start sets' minimiser clipped into the box (a feasible point).
    """
    size, n = f.shape
    lower, upper = start[0].copy(), start[1].copy()
    held = lower | upper | fixed
    pinned = np.where(lower | fixed, lo, np.where(upper, hi, 0.0))
    x = np.minimum(np.maximum(_pinned_solve(h_mat, f, pinned, held), lo), hi)
    out_lo = np.zeros((size, n), dtype=bool)
    out_hi = np.zeros((size, n), dtype=bool)
    out_x = np.empty((size, n))
    todo = np.arange(size)
    for _ in range(4 * n + 10):
        rows = np.arange(todo.size)
        held = lower | upper | fixed
        free = ~held
        target = _pinned_solve(h_mat, f, x, held)
        step = target - x
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(
                free & (step > 0.0) & (target > hi), (hi - x) / step,
                np.where(free & (step < 0.0) & (target < lo), (lo - x) / step, np.inf),
            )  # fmt: skip
        block = np.argmin(ratio, axis=1)
        alpha = ratio[rows, block]
        blocked = alpha < 1.0
        i, j = np.flatnonzero(blocked), block[blocked]
        a = np.maximum(alpha[i], 0.0)[:, None]
        x[i] = np.where(free[i], x[i] + a * step[i], x[i])
        up = step[i, j] > 0.0
        x[i, j] = np.where(up, hi[i, j], lo[i, j])
        upper[i[up], j[up]] = True
        lower[i[~up], j[~up]] = True
        settle = ~blocked
        x[settle] = np.where(free[settle], target[settle], x[settle])
        grad = (h_mat @ x[:, :, None])[:, :, 0] + f
        tol = _DUAL_TOL * (1.0 + np.abs(grad))
        value = np.where(lower, grad, np.where(upper, -grad, np.inf))
        value = np.where(value < -tol, value, np.inf)
        worst = np.argmin(value, axis=1)
        release = settle & np.isfinite(value[rows, worst])
        done = settle & ~release
        out_lo[todo[done]], out_hi[todo[done]] = lower[done], upper[done]
        out_x[todo[done]] = x[done]
        r = np.flatnonzero(release)
        lower[r, worst[r]] = False
        upper[r, worst[r]] = False
        keep = ~done
        if not keep.any():
            break
        todo, h_mat, f, lo, hi, x = todo[keep], h_mat[keep], f[keep], lo[keep], hi[keep], x[keep]
        lower, upper, fixed = lower[keep], upper[keep], fixed[keep]
    # Worlds still running at the cap keep their last sets; the final KKT check in
    # ``solve_box_batch`` hands them to the scalar solver.
    out_x[todo] = x
    return out_lo, out_hi, out_x


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
