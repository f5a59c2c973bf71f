"""The multi-task solver's prioritized step on a batch axis: a secondary QP in the null space.

Per world, as ``multitask.iterate._step`` with ``prioritized=True``:

1. the primary step ``dq1`` (the frame tasks' QP under the limits) is given;
2. ``N``: an orthonormal basis of the null space of the primary rows ``A1`` (the
   right singular vectors past the rank, singular values below ``1e-6`` of the
   largest counting as zero);
3. ``z`` minimises the secondary cost ``|A2 (dq1 + N z) - b2|^2 + d |z|^2`` subject
   to ``dq1 + N z`` meeting the box and the rows (``z = 0`` is feasible), solved by
   the dense dual active set (``qp_dense``, ``dense.solve_qp`` world by world);
4. ``dq = dq1 + N z`` (``dq1`` alone when that QP fails, or ``N`` is empty).

Worlds are grouped by the dimension of their null space; each group is one stack.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from hilbot.kinematics.ik.batch.qp_dense import solve_qp_batch
from hilbot.kinematics.ik.batch.qp_limits import BatchConstraints

Array = NDArray[np.float64]
NULL_TOLERANCE = 1e-6  # as multitask.iterate._NULL_TOLERANCE
SECONDARY_DAMPING = 1e-3  # MultiTaskSolver's default
_OPTIMAL = 0


def null_space_steps(
    dq1: Array, a1: Array, a2: Array, b2: Array, cons: BatchConstraints, damping: float
) -> Array:
    """``dq1 + N z`` per world (see the module docstring).

    Args:
        dq1: (B, n) primary steps, feasible.
        a1: (B, k1, n) primary rows.
        a2: (B, k2, n) secondary rows.
        b2: (B, k2) their errors.
        cons: the limits of the step (box and rows) in every world.
        damping: the secondary QP's damping ``d`` > 0.

    Returns:
        (B, n) the prioritized steps.
    """
    n = dq1.shape[1]
    _, sigma, vt = np.linalg.svd(a1, full_matrices=True)
    top = np.maximum(sigma[:, 0], 1e-12)
    rank = (sigma > NULL_TOLERANCE * top[:, None]).sum(axis=1)
    out = dq1.copy()
    for r in np.unique(n - rank):
        r = int(r)
        if r == 0:
            continue
        w = np.flatnonzero(n - rank == r)
        basis = vt[w, n - r :].transpose(0, 2, 1)  # (W, n, r)
        z = _coordinates(dq1[w], basis, a2[w], b2[w], cons, w, damping)
        out[w] += (basis @ z[:, :, None])[:, :, 0]
    return out


def _coordinates(
    dq1: Array,
    basis: Array,
    a2: Array,
    b2: Array,
    cons: BatchConstraints,
    w: NDArray[np.intp],
    damping: float,
) -> Array:
    """The null-space coordinates ``z`` (W, r) of the worlds ``w``."""
    size, _, r = basis.shape
    a2n = a2 @ basis
    a2n_t = a2n.transpose(0, 2, 1)
    h_mat = a2n_t @ a2n + damping * np.eye(r)
    resid = (a2 @ dq1[:, :, None])[:, :, 0] - b2
    c = (a2n_t @ resid[:, :, None])[:, :, 0]
    rows = [basis, -basis]
    rhs = [cons.upper[w] - dq1, dq1 - cons.lower[w]]
    if cons.g is not None and cons.h is not None:
        g = cons.g[w]
        rows.append(g @ basis)
        rhs.append(cons.h[w] - (g @ dq1[:, :, None])[:, :, 0])
    g_all = np.concatenate(rows, axis=1)
    h_all = np.concatenate(rhs, axis=1)
    # The scalar code keeps the rows with a finite right-hand side, in order, with
    # h := max(h, 0) (dq1 is feasible, round-off may leave h a hair below 0).
    finite = np.isfinite(h_all)
    order = np.argsort(~finite, axis=1, kind="stable")
    g_all = np.take_along_axis(g_all, order[:, :, None], axis=1)
    h_all = np.take_along_axis(h_all, order, axis=1)
    count = finite.sum(axis=1)
    pad = np.arange(h_all.shape[1])[None, :] >= count[:, None]
    g_all[pad] = 0.0
    h_all = np.where(pad, np.inf, np.maximum(h_all, 0.0))
    z = np.zeros((size, r))
    free = np.flatnonzero(count == 0)  # no row at all: the unconstrained minimiser
    if free.size:
        z[free] = np.linalg.solve(h_mat[free], -c[free][:, :, None])[:, :, 0]
    some = np.flatnonzero(count > 0)
    if some.size:
        inf = np.full((some.size, r), np.inf)
        out = solve_qp_batch(h_mat[some], c[some], g_all[some], h_all[some], count[some], -inf, inf)
        z[some] = np.where((out.status == _OPTIMAL)[:, None], out.x, 0.0)
    return z


__all__ = ["NULL_TOLERANCE", "SECONDARY_DAMPING", "null_space_steps"]
