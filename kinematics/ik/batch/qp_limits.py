"""The limits of a QP step for a whole batch: box bounds (B, n) and rows ``G dq <= h`` per world.

``ConfigurationLimit``, ``VelocityLimit`` and ``LinearInequality`` are evaluated on
the batch axis with the formulas of their ``constraint`` methods; any other limit
(``CollisionAvoidance``, a user's own ``Limit``) is asked world by world through a
``ChainContext``, as the single-world solver asks it. The bounds are intersected
and conflicts resolved as ``qp_step.gather`` does (a coordinate a limit would move
away from ``dq = 0`` is held at 0), so each world sees exactly the problem the
single-world solver builds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from hilbot.kinematics.ik.qp.limits.configuration_limit import ConfigurationLimit
from hilbot.kinematics.ik.qp.limits.limit import Limit
from hilbot.kinematics.ik.qp.limits.linear_inequality import LinearInequality
from hilbot.kinematics.ik.qp.limits.velocity_limit import VelocityLimit
from hilbot.kinematics.ik.qp.qp_solver import ChainContext

Array = NDArray[np.float64]


class BatchConstraints(NamedTuple):
    """The constraints of B steps.

    Attributes:
        lower: (B, n) box lower bounds on ``dq`` (<= 0).
        upper: (B, n) box upper bounds (>= 0).
        g: (B, m, n) general rows, or None when no limit gives rows.
        h: (B, m) right-hand sides (``+inf`` on padding rows of worlds with fewer rows).
        rows: (B,) number of real rows of each world (padding follows them).
    """

    lower: Array
    upper: Array
    g: Array | None
    h: Array | None
    rows: NDArray[np.int64] | None


def gather_batch(
    limits: Sequence[Limit],
    chain: Any,
    names: tuple[str, ...],
    q: Array,
    lower: Array,
    upper: Array,
    contexts: list[ChainContext] | None = None,
) -> BatchConstraints:
    """Intersect the limits' boxes with ``[lower, upper]`` and stack their rows, per world.

    Args:
        limits: the hard limits.
        chain: the solved chain.
        names: the joint name of each column.
        q: (B, n) the configurations the limits linearise around.
        lower: (B, n) the call's box lower bounds on ``dq``.
        upper: (B, n) the call's box upper bounds on ``dq``.
        contexts: per-world contexts for the limits asked world by world (built if None).

    Returns:
        The constraints; a world's rows are those its own ``ChainContext`` gives.
    """
    lo, hi = lower.copy(), upper.copy()
    # Per-world rows only exist for limits asked world by world (built on first need:
    # a list per world costs more than a vectorised limit at B = 1000).
    per_world: list[list[tuple[Array, Array]]] = []
    dense: list[tuple[Array, Array]] = []
    for limit in limits:
        if type(limit) is ConfigurationLimit:
            _configuration(limit, chain, q, lo, hi)
        elif type(limit) is VelocityLimit:
            part = limit.constraint(ChainContext(chain, q[0], names))
            assert part.lower is not None and part.upper is not None
            np.maximum(lo, part.lower, out=lo)
            np.minimum(hi, part.upper, out=hi)
        elif type(limit) is LinearInequality:
            _check_columns(limit, names)
            h = limit.h - q @ limit.g.T if limit.on == "configuration" else limit.h
            dense.append(
                (
                    np.broadcast_to(limit.g, (q.shape[0], *limit.g.shape)),
                    np.broadcast_to(h, (q.shape[0], limit.g.shape[0])),
                )
            )
        else:
            if contexts is None:
                contexts = [ChainContext(chain, q[b], names) for b in range(q.shape[0])]
            if not per_world:
                per_world = [[] for _ in range(q.shape[0])]
            _per_world(limit, contexts, lo, hi, per_world)
    conflict = lo > hi
    if conflict.any():
        lo[conflict] = 0.0
        hi[conflict] = 0.0
    g_all, h_all, rows = _stack(dense, per_world, q.shape)
    return BatchConstraints(lo, hi, g_all, h_all, rows)


def _configuration(limit: ConfigurationLimit, chain: Any, q: Array, lo: Array, hi: Array) -> None:
    """``ConfigurationLimit.constraint`` on the batch axis, intersected into ``lo, hi``."""
    lower, upper = limit.step_bounds(chain.lower, chain.upper, q)
    np.maximum(lo, lower, out=lo)
    np.minimum(hi, upper, out=hi)


def _check_columns(limit: LinearInequality, names: tuple[str, ...]) -> None:
    if limit.g.shape[1] != len(names):
        raise ValueError(
            f"LinearInequality has {limit.g.shape[1]} columns but the solve has {len(names)} "
            f"({', '.join(names)})"
        )


def _per_world(
    limit: Limit,
    contexts: list[ChainContext],
    lo: Array,
    hi: Array,
    per_world: list[list[tuple[Array, Array]]],
) -> None:
    for b, context in enumerate(contexts):
        part = limit.constraint(context)
        if part.lower is not None:
            np.maximum(lo[b], part.lower, out=lo[b])
        if part.upper is not None:
            np.minimum(hi[b], part.upper, out=hi[b])
        if part.g is not None and part.h is not None and part.g.shape[0]:
            per_world[b].append((part.g, part.h))


def _stack(
    dense: list[tuple[Array, Array]],
    per_world: list[list[tuple[Array, Array]]],
    shape: tuple[int, ...],
) -> tuple[Array | None, Array | None, NDArray[np.int64] | None]:
    """Rows of each world in limit order, padded with inert rows (``0 dq <= inf``)."""
    size, n = shape
    if not dense and not any(per_world):
        return None, None, None
    base = sum(g.shape[1] for g, _ in dense)
    extra = np.zeros(size, dtype=np.int64)
    if per_world:
        extra[:] = [sum(g.shape[0] for g, _ in rows) for rows in per_world]
    m = base + int(extra.max(initial=0))
    g_all = np.zeros((size, m, n))
    h_all = np.full((size, m), np.inf)
    # Rows in the order the limits were given: the dense ones first only when they came
    # first; a world's rows are exact copies of what its own context yields, in order.
    at = 0
    for g, h in dense:
        k = g.shape[1]
        g_all[:, at : at + k] = g
        h_all[:, at : at + k] = h
        at += k
    for b, rows in enumerate(per_world):
        start = base
        for g, h in rows:
            k = g.shape[0]
            g_all[b, start : start + k] = g
            h_all[b, start : start + k] = h
            start += k
    return g_all, h_all, base + extra
