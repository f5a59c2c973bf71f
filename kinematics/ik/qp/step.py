"""One QP step: gather the limits' constraints and solve for ``dq`` (box or general path)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from hilbot.kinematics.ik.qp.dense import QPResult, QPStatus, solve_box_qp, solve_qp
from hilbot.kinematics.ik.qp.limits.limit import Limit, LimitContext

Array = NDArray[np.float64]


def solve_step(
    h_mat: Array,
    c: Array,
    limits: Sequence[Limit],
    context: LimitContext,
    lower: Array,
    upper: Array,
) -> tuple[Array, QPResult]:
    """Minimise ``0.5 dq'H dq + c'dq`` under the limits and the box ``lower <= dq <= upper``.

    Box-only limits go to the box path; any row sends the problem to the general
    path. The box must contain ``0`` (the current configuration is feasible); a limit
    that would exclude it for some coordinate holds that coordinate instead. When
    the rows are infeasible together with the box (a collision pair already inside
    its margin that the box stops from separating), the rows are relaxed to "do not
    get closer" (``h := max(h, 0)``), which ``dq = 0`` always satisfies.

    Args:
        h_mat: (nv, nv) positive definite Hessian.
        c: (nv,) linear term.
        limits: the hard limits.
        context: the configuration the limits linearise around.
        lower: (nv,) box lower bounds on ``dq`` (<= 0).
        upper: (nv,) box upper bounds on ``dq`` (>= 0).

    Returns:
        ``(dq, result)``; ``dq`` satisfies every box bound exactly.
    """
    lo, hi, g_mat, h_vec = gather(limits, context, lower, upper)
    if g_mat is None or h_vec is None:
        result = solve_box_qp(h_mat, c, lo, hi)
        return result.x, result
    result = solve_qp(h_mat, c, g_mat, h_vec, lo, hi)
    if result.status is QPStatus.INFEASIBLE:
        result = solve_qp(h_mat, c, g_mat, np.maximum(h_vec, 0.0), lo, hi)
    if result.status is not QPStatus.OPTIMAL:
        return np.zeros_like(c), result
    return result.x, result


def gather(
    limits: Sequence[Limit], context: LimitContext, lower: Array, upper: Array
) -> tuple[Array, Array, Array | None, Array | None]:
    """Intersect the limits' boxes with ``[lower, upper]`` and stack their rows.

    A coordinate whose bounds conflict (a limit excluding ``dq = 0``) is held at 0.

    Returns:
        ``(lower (nv,), upper (nv,), G (m, nv) or None, h (m,) or None)``.
    """
    lo = lower
    hi = upper
    rows: list[Array] = []
    rhs: list[Array] = []
    for limit in limits:
        part = limit.constraint(context)
        if part.lower is not None:
            lo = np.maximum(lo, part.lower)
        if part.upper is not None:
            hi = np.minimum(hi, part.upper)
        if part.g is not None and part.h is not None and part.g.shape[0]:
            rows.append(part.g)
            rhs.append(part.h)
    conflict = lo > hi
    if conflict.any():
        lo = lo.copy()
        hi = hi.copy()
        lo[conflict] = 0.0
        hi[conflict] = 0.0
    if not rows:
        return lo, hi, None, None
    return lo, hi, np.vstack(rows), np.concatenate(rhs)
